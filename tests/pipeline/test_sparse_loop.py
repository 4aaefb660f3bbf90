"""The nightly loop on a sparse log: windows that hold enough cases, no epoch
chosen on no signal, the popularity ranking as the guard's floor, and a
published model that has learned the newest events."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from genni.components import schema
from genni.pipeline.cli import main as cli
from genni.pipeline.loop import run_pipeline
from genni.pipeline.preprocess import inmemory, windows
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.serving import export, guard
from genni.pipeline.training import rundir
from tests.pipeline.test_workflow import TINY

# The loop's preprocess step in memory (conftest: `in_memory_preprocessing`).
pytestmark = pytest.mark.usefixtures("in_memory_preprocessing")

DAY = 86400


def _inter(path, events) -> str:
    """A RecBole atomic file of (user, item, day) events."""
    lines = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    lines += [f"{u}\t{i}\t5\t{d * DAY + n}" for n, (u, i, d) in enumerate(events)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _chain_events(users, days, items=12, start=0):
    """Each user walks a ring of `items` items, one step a day."""
    return [
        (f"u{u}", f"i{(u + d) % items}", start + d)
        for u in range(users)
        for d in range(days)
    ]


def test_a_short_window_is_widened_and_one_still_short_is_reported(tmp_path):
    # 40 users a day for 60 days, then 3 cases a day in the last 14 days.
    events = _chain_events(40, 60)
    events += [
        (f"u{u}", f"i{(u + 60 + d) % 12}", 60 + d) for d in range(14) for u in range(3)
    ]
    log = _inter(tmp_path / "log.inter", events)
    config = PreprocessConfig(
        input=log,
        output=str(tmp_path / "data"),
        split="time",
        test_days=3,
        min_count=2,
        min_cases=30,
    )
    said = []
    stats = windows.preprocess(config, inmemory.run, log=said.append)
    window = stats["time_split"]
    # 3 days hold 9 cases: each window widened to 12 days (36 cases) or more.
    assert window["asked_days"] == {"valid": 3.0, "test": 3.0}
    assert window["test_days"] > 3 and window["valid_days"] > 3
    assert windows.scoreable(stats, "test") >= 30
    assert not windows.short_windows(stats)
    assert any("widened" in line for line in said)
    on_disk = rundir.read_json(os.path.join(config.output, schema.STATS_FILE))
    assert on_disk["time_split"]["asked_days"] == window["asked_days"]
    # Asking for more than the log can give: kept, reported, never silent.
    config = dataclasses.replace(
        config, output=str(tmp_path / "short"), min_cases=10_000
    )
    said.clear()
    stats = windows.preprocess(config, inmemory.run, log=said.append)
    assert windows.short_windows(stats) == ["valid", "test"]
    assert any("below 10000 scoreable cases" in line for line in said)
    # The days taken stay within half of the log's.
    window = stats["time_split"]
    assert window["valid_days"] + window["test_days"] <= window["log_days"] / 2


def _no_signal_log(path) -> str:
    """Validation targets are items never met before the validation cutoff;
    test targets are known ones."""
    events = _chain_events(30, 30)
    events += [(f"u{u}", f"fresh{u % 5}", 41 + u % 3) for u in range(30)]
    events += [(f"u{u}", f"i{(u + 3) % 12}", 49 + u % 3) for u in range(30)]
    return _inter(path, events)


def test_a_run_with_no_validation_hit_is_flagged_and_not_published(tmp_path, capsys):
    log = _no_signal_log(tmp_path / "log.inter")
    config = {
        "input": log,
        "workdir": str(tmp_path / "work"),
        "preprocess": {"split": "time", "test_days": 7, "min_count": 2},
        "train": dict(TINY),
        "export": {"k": 5, "baseline": "none"},
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli.main(["pipeline", "--config", str(path)]) == 3
    out = capsys.readouterr().out
    result = run_pipeline(str(path), log=lambda _: None)
    metrics = rundir.read_json(os.path.join(result.run, rundir.METRICS_FILE))
    assert metrics["validation_signal"] is False
    assert metrics["cases"]["valid"] == {"cases": 30, "scoreable": 0}
    assert "chosen on no signal" in out
    decision = result.export
    assert decision["decision"] == "refused" and "no signal" in decision["why"]
    assert decision["candidate"] is None  # Refused before it was measured.
    # Nothing was published (no baseline: nothing serves).
    assert guard.served_version(os.path.join(config["workdir"], "models")) is None


def test_train_says_which_cases_a_window_holds(tmp_path, capsys):
    log = _no_signal_log(tmp_path / "log.inter")
    data = str(tmp_path / "data")
    inmemory.run(
        PreprocessConfig(input=log, output=data, split="time", test_days=7, min_count=2)
    )
    args = ["train", "--data", data, "--output", str(tmp_path / "run"), "--quiet"]
    args += ["--epochs", "2", "--hidden-size", "8", "--num-heads", "1"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "valid 0 scoreable of 30" in out
    assert "Warning: no validation case was ranked in the top 10" in out


def test_the_published_model_has_learned_the_last_window(tmp_path):
    # Item "late" is met only in the log's last 7 days (the test window).
    events = _chain_events(30, 40)
    events += [(f"u{u}", "late", 45 + u % 3) for u in range(30)]
    log = _inter(tmp_path / "log.inter", events)
    config = {
        "input": log,
        "workdir": str(tmp_path / "work"),
        "preprocess": {"split": "time", "test_days": 7, "min_count": 2},
        "train": {**TINY, "candidates": "all"},  # Users walk a ring.
        "export": {"k": 5, "baseline": "none", "refit": True},
    }
    result = run_pipeline(config, log=lambda _: None)
    decision = result.export
    assert decision["decision"] == "published"
    assert decision["judged_run"] == result.run != decision["run"]
    assert decision["run"] == result.refit
    # The judged run never met "late"; the published one learned its events.
    judged_items = (Path(result.data) / schema.ITEMS_FILE).read_text()
    assert "late" not in judged_items.split()
    top_k = guard.top_k_signature(decision["path"])
    import tensorflow as tf

    served = top_k(history=tf.constant([["i1", "i2"]]), k=tf.constant(1_000))
    assert b"late" in served[export.ITEM_IDS].numpy()[0].tolist()
    refit_data = rundir.read_json(os.path.join(result.refit, rundir.CONFIG_FILE))[
        "data"
    ]
    learned = (Path(refit_data) / schema.SEQUENCES_FILE).read_text()
    assert "late" in learned
    # The refit trained the judged run's best epoch count, with no validation.
    judged = rundir.read_json(os.path.join(result.run, rundir.METRICS_FILE))
    refit = rundir.read_json(os.path.join(result.refit, rundir.METRICS_FILE))
    assert refit["epochs_run"] == judged["best_epoch"] and refit["valid"] == {}
    # Run again: every step is up to date, nothing new trained or published.
    again = run_pipeline(config, log=lambda _: None)
    assert again.refit == result.refit and again.run == result.run
    assert guard.served_version(os.path.join(config["workdir"], "models")) == 1

"""`genni pipeline`: every step once, then nothing again for the same inputs."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from genni.pipeline.cli import main as cli
from genni.pipeline.loop import PipelineResult, run_pipeline, steps
from genni.pipeline.loop import config as loop_config
from genni.pipeline.preprocess import beam, synthetic
from genni.pipeline.serving import guard
from genni.pipeline.training import train

# The loop's preprocess step in memory (conftest: `in_memory_preprocessing`).
pytestmark = pytest.mark.usefixtures("in_memory_preprocessing")

TINY = {"epochs": 2, "hidden_size": 8, "num_heads": 1, "num_layers": 1}


@pytest.fixture
def pipeline_file(tmp_path):
    log = str(tmp_path / "logs" / "reviews.json.gz")
    synthetic.write_log(
        synthetic.SyntheticConfig(num_users=200, num_items=40, noise_users=0), log
    )

    def write(**sections):
        config = {
            "input": str(tmp_path / "logs" / "*.json.gz"),
            "workdir": str(tmp_path / "work"),
            "train": dict(TINY),
            # The tiny runs need not beat popularity here (test_sparse_loop).
            "export": {"k": 5, "baseline": "none"},
            **sections,
        }
        path = tmp_path / "pipeline.yaml"
        path.write_text(yaml.safe_dump(config))
        return str(path)

    return write


@pytest.fixture
def no_command_line(monkeypatch):
    """Fails a call that parses the `genni` command line or starts a process."""

    def refuse(*args, **kwargs):
        raise AssertionError("the loop's functions parse no command, start nothing")

    for name in ("main", "build_parser"):
        monkeypatch.setattr(cli, name, refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def _never(*args, **kwargs):
    raise AssertionError("this step should have been skipped")


@pytest.mark.beam  # The one loop test on Beam, as users run it.
def test_second_run_does_nothing(pipeline_file, monkeypatch, capsys):
    path = pipeline_file()
    assert cli.main(["pipeline", "--config", path]) == 0
    out = capsys.readouterr().out
    assert "train: training" in out and "export: published" in out
    base = os.path.join(os.path.dirname(path), "work", "models")
    assert guard.served_version(base) == 1

    monkeypatch.setattr(beam, "preprocess", _never)
    monkeypatch.setattr(train, "train", _never)
    monkeypatch.setattr(guard, "guarded_export", _never)
    assert cli.main(["pipeline", "--config", path]) == 0
    out = capsys.readouterr().out
    for step in ("preprocess", "train", "export"):
        assert f"{step}: up to date" in out
    assert guard.served_version(base) == 1
    # The export step is up to date only for the same export settings.
    path = pipeline_file(export={"k": 3, "baseline": "none"})
    with pytest.raises(AssertionError, match="skipped"):
        run_pipeline(path, log=lambda _: None)


def test_changed_settings_train_and_guard_a_new_run(pipeline_file, capsys):
    first = run_pipeline(pipeline_file(), log=lambda _: None)
    # Barely trained: worse than what serves, so it is refused, and the
    # refusal is remembered against the same served version.
    worse = dict(TINY, epochs=1, learning_rate=1e-6)
    path = pipeline_file(train=worse)
    second = run_pipeline(path, log=lambda _: None)
    assert second.run != first.run
    assert second.export["decision"] == "refused"
    assert cli.main(["pipeline", "--config", path]) == 3
    assert "refused before against version 1" in capsys.readouterr().out
    base = os.path.dirname(first.export["path"])
    with open(os.path.join(base, guard.DECISIONS_FILE)) as f:
        assert [json.loads(line)["decision"] for line in f] == [
            "published",
            "refused",
        ]


def test_the_train_section_starts_from_genni_trains_default_preset():
    run = loop_config.train_config({"train": {"epochs": 2}}, "D", {})
    assert (run.loss, run.sampler.num_negatives, run.sampler.alpha, run.epochs) == (
        "sampled_softmax",
        64,
        1.0,
        2,
    )
    paper = loop_config.train_config({"train": {"preset": "paper"}}, "D", {})
    assert (paper.loss, paper.sampler.num_negatives, paper.sampler.alpha) == (
        "bce",
        1,
        2.5,
    )
    tuned = loop_config.train_config({"train": {"preset": "paper"}}, "D", {"alpha": 4})
    assert tuned.sampler.alpha == 4  # The tuned settings win.
    with pytest.raises(ValueError, match="Unknown preset"):
        loop_config.train_config({"train": {"preset": "fast"}}, "D", {})


def test_new_input_is_preprocessed_again(pipeline_file, tmp_path, monkeypatch):
    path = pipeline_file()
    config = loop_config.load_config(path)
    steps.step_preprocess(config, log=lambda _: None)
    monkeypatch.setattr(beam, "preprocess", _never)
    steps.step_preprocess(config, log=lambda _: None)  # Up to date.
    log = tmp_path / "logs" / "reviews.json.gz"
    os.utime(log, (1, 1))  # The input changed.
    with pytest.raises(AssertionError, match="skipped"):
        steps.step_preprocess(config, log=lambda _: None)


@pytest.mark.parametrize(
    "text, message",
    [
        ("input: x\n", "needs `workdir:`"),
        ("input: x\nworkdir: w\ntrainer: {}\n", "Unknown sections"),
        ("input: x\nworkdir: w\nexport: {kk: 1}\n", "Unknown `export:` settings"),
        ("- a\n", "mapping"),
        # Issue 46: every section is read by the settings' types and checked
        # before any step writes.
        ("input: x\nworkdir: w\nexport: {k: -3}\n", "`k` must be at least 1"),
        ("input: x\nworkdir: w\nexport: {split: tset}\n", "`split` must be one of"),
        ("input: x\nworkdir: w\ntrain: {epochs: 1.5}\n", "`epochs` must be a whole"),
        ("input: x\nworkdir: w\ntrain: {batch_size: true}\n", "`batch_size` must"),
        ("input: x\nworkdir: w\ntune: {max_trials: 0}\n", "`max_trials` must be at"),
        ("input: x\nworkdir: w\npreprocess: {min_count: two}\n", "`min_count` must"),
        ("input: x\nworkdir: w\ninput: y\n", "the key 'input' is given twice"),
        ("input: x\nworkdir: w\ntrain: {epochs: 1, epochs: 2}\n", "given twice"),
        # Issue 51: a refit learns the windows of the split by time.
        ("input: x\nworkdir: w\nexport: {refit: true}\n", "`export: refit` needs"),
        ("input: x\nworkdir: w\nexport: {baseline: pop}\n", "`baseline` must"),
        (
            "input: x\nworkdir: w\npreprocess: {split: time, test_days: 7, "
            "min_cases: -1}\n",
            "`min_cases` must be at least 0",
        ),
    ],
)
def test_bad_pipeline_files(tmp_path, text, message, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # workdir `w` would be here.
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert cli.main(["pipeline", "--config", str(path)]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_a_yaml_float_like_1e_3_is_a_float():
    config = {"input": "x", "workdir": "w", "train": {"learning_rate": "1e-3"}}
    assert loop_config.train_config(config, "D", {}).learning_rate == 0.001


def _timed_log(path, users, days, items, new=0):
    """A log with a review every other day of `days` for each user."""
    from tests.conftest import review

    lines = [
        review(f"u{u}", f"i{(u * 3 + d) % items}", d * 86400 + u)
        for u in range(users)
        for d in days
    ]
    lines += [
        review(f"u{u}", f"new{(u + d) % new}", d * 86400 + 50 + u)
        for u in range(users)
        for d in days
        if new and d % 3 == 0
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _loop_config(tmp_path, **export):
    """The nightly loop on a 40-day log of 30 users (logs/a.json), its
    guard without the popularity floor (`export`: more settings)."""
    _timed_log(tmp_path / "logs" / "a.json", 30, range(0, 40, 2), 20)
    return {
        "input": str(tmp_path / "logs" / "*.json"),
        "workdir": str(tmp_path / "work"),
        "preprocess": {"split": "time", "test_days": 4, "min_count": 2},
        # Users meet items again: only --candidates all can hit.
        "train": {**TINY, "warm_start": "served", "candidates": "all"},
        "export": {"k": 5, "baseline": "none", **export},
    }


def test_the_nightly_loop_warm_starts_from_the_served_run(
    tmp_path, capsys, no_command_line
):
    """`run_pipeline` as a scheduler calls it, night after night: a mapping of
    settings in, a `PipelineResult` out, no command line."""
    from genni.models.encoders import registry as encoders
    from genni.pipeline.preprocess import outputs
    from genni.pipeline.training import model

    logs = tmp_path / "logs"
    config = _loop_config(tmp_path)
    first = run_pipeline(config, log=print)
    assert isinstance(first, PipelineResult) and first.published
    assert model.read_config(first.run).warm_start is None  # Nothing served.
    assert first.export["decision"] == "published"
    # The log grows by twenty days, with new items.
    _timed_log(logs / "b.json", 30, range(40, 60, 2), 20, new=3)
    second = run_pipeline(config, log=print)
    out = capsys.readouterr().out
    assert f"keeping the ids of {first.data}" in out
    assert model.read_config(second.run).warm_start == first.run
    _, old_items = outputs.read_vocabulary(first.data)
    _, new_items = outputs.read_vocabulary(second.data)
    assert new_items[: len(old_items)] == old_items and len(new_items) > len(old_items)
    assert second.export["decision"] in ("published", "refused")
    # The same log again: nothing to do, whichever version serves.
    third = run_pipeline(config, log=print)
    assert third.run in (first.run, second.run)
    assert "train: up to date" in capsys.readouterr().out
    # Another model (here: another encoder) cannot take the served weights:
    # the run trains from scratch and the log says why.
    served = model.read_config(third.run).model.encoder
    other = next(name for name in encoders.names() if name != served)
    fourth = run_pipeline(
        {**config, "train": {**config["train"], "encoder": other}}, log=print
    )
    assert model.read_config(fourth.run).warm_start is None
    out = capsys.readouterr().out
    assert f"its model differs (encoder {served} vs {other})" in out


def test_warm_start_takes_served_only():
    with pytest.raises(ValueError, match="takes `served`"):
        loop_config.train_config({"train": {"warm_start": "runs/x"}}, "D", {})


def test_the_loop_with_refits_warm_starts_from_the_served_refit(tmp_path, capsys):
    """With `export: {refit: true}` the served run is a refit on every event:
    the next step keeps its dataset's ids and starts from its weights, and
    is judged against the run that judged it."""
    from genni.pipeline.preprocess import outputs
    from genni.pipeline.training import model

    logs = tmp_path / "logs"
    config = _loop_config(tmp_path, refit=True)
    first = run_pipeline(config, log=print)
    assert first.export["decision"] == "published"
    assert first.export["run"] == first.refit != first.run
    refit_data = model.read_config(first.refit).data
    _timed_log(logs / "b.json", 30, range(40, 60, 2), 20, new=3)
    second = run_pipeline(config, log=print)
    out = capsys.readouterr().out
    assert f"keeping the ids of {refit_data}" in out
    assert model.read_config(second.run).warm_start == first.refit
    assert model.read_config(second.refit).warm_start == first.refit
    _, old_items = outputs.read_vocabulary(refit_data)
    _, new_items = outputs.read_vocabulary(second.data)
    assert new_items[: len(old_items)] == old_items
    # The served refit was judged by its judged run, measured afresh. (A
    # rerun is up to date: test_sparse_loop.)
    assert second.export["served"] is not None

"""The loop as a scheduler calls it: `run_pipeline` and `run_replay` are plain
Python functions, settings in and a result out, with no command line and no
child process."""

from __future__ import annotations

import json

import pytest

from genni.pipeline.loop import run_pipeline, run_replay
from tests.pipeline.test_workflow import (  # noqa: F401 (a fixture)
    TINY,
    _timed_log,
    no_command_line,
)

# The loop's preprocess step in memory (conftest: `in_memory_preprocessing`).
pytestmark = pytest.mark.usefixtures("in_memory_preprocessing")


@pytest.mark.usefixtures("no_command_line")
def test_the_pipeline_and_the_replay_are_functions(tmp_path, monkeypatch):
    from genni.pipeline.training import train

    log = tmp_path / "log.json"
    _timed_log(log, 20, range(0, 40, 2), 20)
    sections = {
        "preprocess": {"split": "time", "test_days": 4, "min_count": 2},
        "train": {**TINY, "epochs": 1, "candidates": "all"},
        "export": {"k": 5, "baseline": "none"},
    }
    # A checked mapping: a wrong setting is refused before anything is written.
    with pytest.raises(ValueError, match="epochs"):
        run_pipeline(
            {
                "input": str(log),
                "workdir": str(tmp_path / "bad"),
                "train": {"epochs": 0},
            }
        )
    assert not (tmp_path / "bad").exists()

    # The pipeline's every step, as a function: test_workflow.py (the loop).
    trained: list[str] = []
    real = train.train
    monkeypatch.setattr(
        train,
        "train",
        lambda config, **kw: trained.append(config.output) or real(config, **kw),
    )
    said: list[str] = []
    rows = run_replay(
        str(log),
        6,
        1,
        sections,
        str(tmp_path / "replay"),
        log=said.append,
    )
    assert [r["step"] for r in rows] == [1] and rows[0]["cases"] > 0
    # Step 1: nothing serves yet, so both loops would train the same run from
    # the same data and seed: the warm loop trains it once, the scratch loop
    # links it (issue 66; a refit the same way) and publishes it as its own.
    assert [p.split("/replay/")[1].split("/")[0] for p in trained] == ["warm"]
    row = rows[0]
    assert row["scratch_reused"] == "warm" and row["warm_reused"] is None
    assert row["scratch_train_seconds"] == 0 and row["warm_train_seconds"] > 0
    assert row["scratch_epochs"] == {"trained": 0, "chosen": 1, "refit": None}
    assert row["warm_epochs"] == {"trained": 1, "chosen": 1, "refit": None}
    links = list((tmp_path / "replay" / "scratch" / "runs").iterdir())
    assert len(links) == 1 and links[0].is_symlink()
    assert row["scratch_export"] == row["warm_export"] == "published"
    assert 0.0 <= row["scratch"]["NDCG@10"] <= 100.0
    assert row["never"] == row["warm"] == row["scratch"]
    assert json.loads((tmp_path / "replay" / "replay.json").read_text()) == rows
    assert any("[scratch] export: published" in line for line in said)
    report = (tmp_path / "replay" / "replay.md").read_text()
    assert "| warm's run (1) |" in report
    assert "step 1: the scratch loop's run is the warm loop's" in report

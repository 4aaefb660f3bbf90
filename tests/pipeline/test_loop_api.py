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
def test_the_pipeline_and_the_replay_are_functions(tmp_path):
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
    said: list[str] = []
    rows = run_replay(
        str(log),
        6,
        1,
        sections,
        str(tmp_path / "replay"),
        log=said.append,
        loops=("scratch",),
    )
    assert [r["step"] for r in rows] == [1] and rows[0]["cases"] > 0
    # The loop from scratch (`genni replay --loops scratch`; the warm loop:
    # test_replay.py), and the first version, never retrained, is its.
    assert rows[0]["scratch_export"] == "published" and not rows[0]["warm"]
    assert 0.0 <= rows[0]["scratch"]["NDCG@10"] <= 100.0
    assert rows[0]["never"] == rows[0]["scratch"]
    assert rows[0]["scratch_train_seconds"] > 0
    assert rows[0]["scratch_epochs"] == {"trained": 1, "chosen": 1, "refit": None}
    assert json.loads((tmp_path / "replay" / "replay.json").read_text()) == rows
    assert any("[scratch] export: published" in line for line in said)
    report = (tmp_path / "replay" / "replay.md").read_text()
    assert "scratch NDCG@10" in report and "warm NDCG@10" not in report

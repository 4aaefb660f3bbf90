"""`genni replay` on a tiny timestamped log: every step runs the nightly
pipeline and scores what it serves on the next period, beside the first model
and the most popular items (the loop from scratch: test_loop_api.py)."""

import json

import pytest
import yaml

from genni.pipeline.cli import main as cli
from genni.pipeline.training import model
from tests.pipeline.test_workflow import TINY, _timed_log

# The loop's preprocess step in memory (conftest: `in_memory_preprocessing`).
pytestmark = pytest.mark.usefixtures("in_memory_preprocessing")


def test_a_replay_runs_end_to_end(tmp_path):
    log = tmp_path / "log.json"
    # 60 days of reviews; new items from day 40 on.
    _timed_log(log, 20, range(0, 60, 2), 20)
    extra = tmp_path / "extra.json"
    _timed_log(extra, 20, range(40, 60, 2), 20, new=3)
    log.write_text(log.read_text() + extra.read_text())
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "preprocess": {"split": "time", "test_days": 4, "min_count": 2},
                "train": {**TINY, "epochs": 1, "candidates": "all"},
                # One epoch need not beat popularity here (test_sparse_loop).
                "export": {"k": 5, "baseline": "none"},
            }
        )
    )
    out = tmp_path / "replay"
    args = ["replay", "--input", str(log), "--every", "6d", "--steps", "2"]
    args += ["--config", str(config), "--output", str(out), "--serve"]
    args += ["--loops", "warm"]
    assert cli.main(args) == 0
    rows = json.loads((out / "replay.json").read_text())
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["cases"] > 0
        for variant in ("warm", "never", "popular"):
            assert 0.0 <= row[variant]["NDCG@10"] <= 100.0
    # Step 1: nothing served before, so the warm loop trained from scratch,
    # and its version is the never-retrained one.
    assert rows[0]["warm"] == rows[0]["never"]
    # Step 2: the loop warm-started from the run it served.
    runs = sorted((out / "warm" / "runs").iterdir())
    started = [model.read_config(str(r)).warm_start for r in runs]
    assert sum(s is not None for s in started) == 1
    assert rows[1]["items"] >= rows[0]["items"]
    # The new items entered the vocabulary at step 2 (a count, and how many
    # a served top-10 held: at most as many).
    assert rows[1]["new_items"] >= 1
    assert 0 <= rows[1]["new_items_reached"] <= rows[1]["new_items"]
    text = (out / "replay.md").read_text()
    assert "Mean NDCG@10" in text and "| 2 |" in text and "entered" in text
    assert "warm NDCG@10" in text and "scratch NDCG@10" not in text  # One loop.
    # What served, and whether it was below the popularity ranking.
    assert rows[0]["warm_served"] == "v1"
    assert rows[1]["warm_served"] == (
        "v2" if rows[1]["warm_export"] == "published" else "v1"
    )
    for row in rows:
        below = row["warm"]["NDCG@10"] < row["popular"]["NDCG@10"]
        assert row["warm_below_popular"] == below
        assert set(row["unservable"]) == {"new", "met"}
        assert 0.0 <= row["kcore"]["catalog"] <= 1.0
    count = sum(r["warm_below_popular"] for r in rows)
    assert f"below the popularity ranking: warm {count} of 2" in text
    # Each loop's training time per step (step 2's warm run a new one).
    assert rows[1]["warm_train_seconds"] > 0 and not rows[1]["scratch"]
    # Each loop's epochs at each step: trained, chosen, and the refit's (none).
    assert rows[0]["warm_epochs"] == {"trained": 1, "chosen": 1, "refit": None}
    assert "warm epochs trained (chosen)" in text and "| 1 (1) |" in text
    assert "Training seconds after step 1" in text
    assert (out / "replay.png").exists()
    # `--serve`: genni serve on the loop's models from step 1's version on,
    # asked all along, never failing.
    serving = rows[-1]["serve"]
    assert serving["requests"] > 0 and serving["failures"] == 0, serving["errors"]
    assert serving["versions"][0] == 1
    assert "requests to `genni serve`" in text


def test_the_report_shows_each_steps_epochs():
    from genni.pipeline.loop.report import epochs_cell

    assert epochs_cell({"trained": 200, "chosen": 7, "refit": 7}) == "200 (7) + refit 7"
    assert epochs_cell({"trained": 0, "chosen": 7, "refit": 0}) == (
        "reused (7) + refit reused"
    )
    assert epochs_cell({"trained": 12, "chosen": 3, "refit": None}) == "12 (3)"
    assert epochs_cell(None) == ""
    assert epochs_cell({"trained": 0, "chosen": 7, "refit": 0}, "warm") == (
        "warm's run (7) + refit warm's"
    )


def test_the_items_file_is_every_steps_catalog_and_keys_the_dataset(tmp_path):
    """`--item-attributes`: the items file in every step's preprocess (its
    items in the vocabulary before their first event), the item tower on
    unless `train:` says otherwise, and a changed file a new dataset."""
    import os

    from genni.pipeline.loop import steps
    from genni.pipeline.loop.replay import with_items_file

    log = tmp_path / "log.json"
    _timed_log(log, 8, range(0, 12, 2), 6)
    items = tmp_path / "items.csv"
    rows = [f"i{i},k{i % 2}" for i in range(6)] + ["soon,k1"]
    items.write_text("item_id,kind\n" + "\n".join(rows) + "\n")
    config = with_items_file({"preprocess": {"min_count": 1}}, str(items))
    assert config["train"] == {"item_tower": True}
    assert with_items_file({"train": {"item_tower": False}}, str(items))["train"] == {
        "item_tower": False
    }
    assert with_items_file(config, None) is config
    with pytest.raises(FileNotFoundError, match="not found"):
        with_items_file({}, str(tmp_path / "missing.csv"))
    config = {**config, "input": str(log), "workdir": str(tmp_path / "work")}
    quiet = lambda *_: None  # noqa: E731
    data = steps.step_preprocess(config, quiet)
    with open(os.path.join(data, "items.txt")) as f:
        assert "soon" in f.read().split()  # Listed, no event yet.
    assert steps.step_preprocess(config, quiet) == data  # Up to date.
    items.write_text(items.read_text() + "later,k0\n")
    os.utime(items, (1, 1))  # Another size and time: another file.
    assert steps.step_preprocess(config, quiet) != data


def test_the_report_shows_each_loops_new_targets():
    from genni.pipeline.loop.report import new_targets_cell

    assert new_targets_cell({"new_targets": {"cases": 29, "HR@10": 3.4483}}) == (
        "29, 3.45"
    )
    assert new_targets_cell({"new_targets": {"cases": 0}}) == "0"
    assert new_targets_cell({}) == ""

"""Runs written before the settings had owners (`ModelConfig`, `SamplerConfig`)
still read, key and resume: tests/data/old_runs holds two, killed in their
last epoch by commit fff6d09 (`make_old_runs.py` there)."""

import json
import shutil
from pathlib import Path

import pytest
import tensorflow as tf

from genni.pipeline.cli import main as cli
from genni.pipeline.training import keys, model, rundir, train
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset
from tests.conftest import make_dataset

OLD_RUNS = Path(__file__).resolve().parents[1] / "data" / "old_runs"
EXPECTED = json.loads((OLD_RUNS / "expected.json").read_text())
MODEL = ["--hidden-size", "8", "--num-layers", "1", "--num-heads", "1"]
FLAGS = {
    # The recommended preset's floor of optimizer steps, its encoder and its
    # learning-rate decay came after this run: it resumes without a floor, as
    # SASRec, at a constant rate (without each flag --resume refuses).
    "recommended": [
        *MODEL,
        *("--batch-size", "64", "--epochs", "2"),
        *("--min-steps", "0", "--encoder", "sasrec", "--lr-half-life", "0"),
    ],
    "capped": [
        "--preset",
        "paper",
        *MODEL,
        "--batch-size",
        "64",
        "--epochs",
        "2",
        "--max-candidates",
        "8",
        "--successors",
        "2",
        "--exclude-seen",
        "--self-adjust-alpha",
        "0.1",
    ],
}


@pytest.fixture(scope="module")
def old_runs(tmp_path_factory):
    """A copy of the old runs beside the dataset they trained on (the same
    synthetic log, remade): paths relative to it, as they were written."""
    root = tmp_path_factory.mktemp("old")
    shutil.copytree(OLD_RUNS, root, dirs_exist_ok=True)
    make_dataset(root, 60, 30, 3, 12)
    return root


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_an_old_run_keeps_its_key_and_restores_every_variable(
    old_runs, monkeypatch, name
):
    monkeypatch.chdir(old_runs)
    config = model.read_config(name)  # Its flat config.json, read by its owners.
    saved, read = rundir.read_json(f"{name}/config.json"), config.to_dict()
    assert {key: read[key] for key in saved} == saved
    later = set(read) - set(saved)  # Settings added since: at their defaults.
    assert {key: read[key] for key in later} == {
        key: TrainConfig.defaults()[key] for key in later
    }
    assert keys.run_key(config, keys.data_fingerprint("data")) == EXPECTED[name]["key"]
    built = model.build_model(config, Dataset.open("data"))
    checkpoint = tf.train.Checkpoint(model=built, optimizer=built.optimizer)
    # Every value the old code saved has its owner in the new model (the
    # sampler's alpha, generator and successor table included).
    path = tf.train.latest_checkpoint(f"{name}/checkpoints")
    assert checkpoint.save_counter is not None  # (Created on use, as by a save.)
    checkpoint.read(path).assert_consumed()
    saved = tf.train.load_checkpoint(f"{name}/checkpoints")
    alpha = [k for k in saved.get_variable_to_shape_map() if "sampler/alpha" in k]
    assert alpha and float(built.sampler.alpha_variable()) == saved.get_tensor(alpha[0])


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_an_old_run_resumes_with_the_flags_it_was_started_with(
    old_runs, monkeypatch, name
):
    monkeypatch.chdir(old_runs)
    resumed = f"{name}_resumed"
    shutil.copytree(name, resumed)
    args = ["train", "--data", "data", "--output", resumed, *FLAGS[name]]
    assert cli.main([*args, "--quiet", "--resume"]) == 0
    metrics = rundir.read_json(f"{resumed}/{train.METRICS_FILE}")
    assert metrics["epochs_run"] == 2
    state = rundir.read_json(f"{resumed}/{train.STATE_FILE}")
    assert [r["epoch"] for r in state["history"]] == [1, 2]  # Epoch 1: the old one.
    # Other settings are refused, naming what the run has.
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*args, "--bogus"])
    assert cli.main([*args, "--alpha", "0.3", "--resume"]) == cli.EXIT_USAGE
    if name == "recommended":
        for flag in ("--min-steps", "--encoder", "--lr-half-life"):
            at = args.index(flag)  # Without it: the preset's, not the run's.
            assert cli.main([*args[:at], *args[at + 2 :], "--resume"]) == cli.EXIT_USAGE

"""`genni train` / `genni evaluate` end to end on a tiny generated dataset."""

import dataclasses
import json
import os

import numpy as np
import pytest

from genni.pipeline.cli import main as cli
from genni.pipeline.training import rundir, train
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset
from genni.pipeline.training.model import build_model, learning_rate
from tests.conftest import make_dataset, tiny_config


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    return make_dataset(root, num_users=500, num_items=150, seed=5, max_len=10)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def _config(data, output, **kwargs):
    values = dict(epochs=3, hidden_size=16, learning_rate=0.005, patience=10)
    return tiny_config(data, output, **(values | kwargs))


def _killed_then_resumed(data, output, monkeypatch, kill_epoch, **kwargs):
    """Train until epoch `kill_epoch` dies before its checkpoint, then resume."""
    original = train._log_epoch

    def killed(writer, record):
        if record["epoch"] == kill_epoch:
            raise KeyboardInterrupt  # Dies before the epoch is checkpointed.
        original(writer, record)

    monkeypatch.setattr(train, "_log_epoch", killed)
    with pytest.raises(KeyboardInterrupt):
        train.train(_config(data, output, **kwargs), verbose=0)
    monkeypatch.setattr(train, "_log_epoch", original)
    assert read_json(output / train.STATE_FILE)["epoch"] == kill_epoch - 1
    return train.train(_config(data, output, **kwargs), resume=True, verbose=0)


def _assert_same_metrics(resumed, straight):
    for split in ("valid", "test"):
        for name, value in straight[split].items():
            assert resumed[split][name] == pytest.approx(value, abs=1e-9), name


def test_tiny_training_beats_a_random_ranking(dataset, tmp_path, monkeypatch):
    data, stats = dataset
    result = train.train(_config(data, tmp_path / "run", epochs=5), verbose=0)
    random_hr10 = 100 * 10 / stats["items"]
    assert result["test"]["HR@10"] > 2 * random_hr10
    assert result["best_epoch"] >= 1 and result["epochs_run"] == 5
    saved = read_json(tmp_path / "run" / train.METRICS_FILE)
    for key in (
        "config",
        "best_epoch",
        "epochs_run",
        "valid",
        "test",
        "seconds_per_epoch",
        "seconds_per_eval",
        "sampler_over_time",
    ):
        assert key in saved
    assert saved["sampler_over_time"][0]["alpha"] == pytest.approx(2.5)
    assert os.listdir(tmp_path / "run" / train.TENSORBOARD_DIR)
    # `genni evaluate` recomputes the test metrics from the saved weights.
    again, _ = train.evaluate(str(tmp_path / "run"), None, "test")
    for name, value in result["test"].items():
        assert again[name] == pytest.approx(value, abs=1e-6)
    # Items ranked 3 at a time give the same result (the chunks bound memory).
    from genni.pipeline.training import evaluate

    assert evaluate.eval_chunk_size() == 2048  # 512 users x 2,048: 4 MiB.
    assert evaluate.eval_batch_size(1000) == 512  # The SavedModel's batches.
    assert evaluate.eval_batch_size(10**6) == 33  # 128 MiB of scores.
    monkeypatch.setattr(evaluate, "EVAL_CHUNK_SCORES", 3 * evaluate.EVAL_BATCH_SIZE)
    assert evaluate.eval_chunk_size() == 3
    small, _ = train.evaluate(str(tmp_path / "run"), None, "test")
    for name, value in result["test"].items():
        assert small[name] == pytest.approx(value, abs=1e-6)


def test_resume_ends_where_an_uninterrupted_run_ends(dataset, tmp_path, monkeypatch):
    data, _ = dataset
    # The learning rate halves every 5 steps: a resumed run goes on from
    # the optimizer's step count, not from the full rate.
    kwargs = dict(sampler="genni", alpha_step=0.05, epochs=3, lr_half_life=5)
    straight = train.train(_config(data, tmp_path / "a", **kwargs), verbose=0)
    resumed = _killed_then_resumed(data, tmp_path / "b", monkeypatch, 3, **kwargs)
    assert resumed["best_epoch"] == straight["best_epoch"]
    _assert_same_metrics(resumed, straight)
    alphas = [r["alpha"] for r in straight["sampler_over_time"]]
    assert [r["alpha"] for r in resumed["sampler_over_time"]] == pytest.approx(alphas)


def test_the_learning_rate_halves_every_half_life_of_steps(dataset):
    data, _ = dataset
    rate = learning_rate(_config(data, "", lr_half_life=40))
    for step, expected in ((0, 0.005), (40, 0.0025), (100, 0.005 * 2**-2.5)):
        assert float(rate(step)) == pytest.approx(expected, rel=1e-5), step
    assert learning_rate(_config(data, "")) == 0.005  # Off (the default).


def test_the_two_level_draw_trains_and_resumes_with_its_clusters(
    dataset, tmp_path, monkeypatch, capsys
):
    data, stats = dataset
    # Refreshed every 3 steps, so that the kill falls between two refreshes:
    # the resumed run must restore the clusters (and their step count).
    kwargs = dict(clusters=8, cluster_samples=16, cluster_refresh=3, epochs=2)
    straight = train.train(_config(data, tmp_path / "a", **kwargs), verbose=1)
    said = capsys.readouterr().out
    assert f"GenNi draws from 8 clusters of {stats['items']:,} items" in said
    random_ndcg10 = 100 * sum(1 / np.log2(r + 2) for r in range(10)) / stats["items"]
    assert straight["test"]["NDCG@10"] > 3 * random_ndcg10
    resumed = _killed_then_resumed(data, tmp_path / "b", monkeypatch, 2, **kwargs)
    _assert_same_metrics(resumed, straight)


def test_successor_candidates_train_resume_and_load_with_their_table(
    dataset, tmp_path, monkeypatch
):
    from genni.pipeline.training.model import load_run

    data, stats = dataset
    kwargs = dict(max_candidates=16, successors=4, epochs=2)
    straight = train.train(_config(data, tmp_path / "a", **kwargs), verbose=0)
    random_ndcg10 = 100 * sum(1 / np.log2(r + 2) for r in range(10)) / stats["items"]
    assert straight["test"]["NDCG@10"] > 3 * random_ndcg10
    table = Dataset.open(data).successor_table(4)
    assert (table[1:, 0] > 0).mean() > 0.5  # Most items have a successor.
    loaded = load_run(str(tmp_path / "a"))  # The table comes with the weights.
    np.testing.assert_array_equal(loaded.sampler.successor_table.numpy(), table)
    resumed = _killed_then_resumed(data, tmp_path / "b", monkeypatch, 2, **kwargs)
    _assert_same_metrics(resumed, straight)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(sampler="uniform", exclude_seen=True),
        dict(sampler="popularity", gamma=0.5, loss="bpr", num_negatives=3),
        dict(sampler="genni", beta_growth=20.0),
        dict(loss="softmax"),
        dict(sampler="genni", loss="sampled_softmax", num_negatives=8, alpha=1.0),
    ],
    ids=["uniform", "popularity-bpr", "genni-growing-beta", "softmax", "genni-ssm"],
)
def test_each_sampler_and_loss_trains(dataset, tmp_path, kwargs):
    data, stats = dataset
    # A random ranking of the items: NDCG@10 = sum_{r<10} 1/log2(r+2) / items
    # (a little more with the user's items left out); untrained: about 2.8.
    random_ndcg10 = 100 * sum(1 / np.log2(r + 2) for r in range(10)) / stats["items"]
    result = train.train(_config(data, tmp_path / "run", epochs=1, **kwargs), verbose=0)
    # One epoch on the planted transitions: 18 to 21 here.
    assert result["test"]["NDCG@10"] > 3 * random_ndcg10, kwargs
    if kwargs.get("beta_growth"):
        growing = read_json(tmp_path / "run" / train.METRICS_FILE)
        assert growing["sampler_over_time"][0]["beta"] == pytest.approx(0.001)


def test_existing_run_needs_resume_and_same_settings(dataset, tmp_path):
    data, _ = dataset
    config = _config(data, tmp_path / "run", epochs=1)
    train.train(config, verbose=0)
    with pytest.raises(train.RunExistsError, match="--resume"):
        train.train(config, verbose=0)
    # The error says what the run has, so that its settings can be passed.
    with pytest.raises(ValueError, match=r"has alpha 2\.5 \(now 1\.0\)"):
        train.train(_config(data, tmp_path / "run", epochs=1, alpha=1.0), resume=True)
    # Each setting that differs is named with both values.
    with pytest.raises(ValueError, match=r"has patience_growth 0\.0 \(now 0\.5\)"):
        train.train(
            _config(data, tmp_path / "run", epochs=1, patience_growth=0.5), resume=True
        )


def test_a_run_another_process_trains_is_refused_and_untouched(dataset, tmp_path):
    data, _ = dataset
    config = _config(data, tmp_path / "run", epochs=1)
    with rundir.claim(config.output):  # As a `genni train` still running.
        with pytest.raises(train.RunBusyError, match="another process"):
            train.train(config, verbose=0)
        assert cli.main(["train", "--data", data, "--output", config.output]) == 2
    assert os.listdir(config.output) == [rundir.LOCK_FILE]
    train.train(config, verbose=0)  # Free again.
    assert os.path.exists(os.path.join(config.output, train.METRICS_FILE))


def test_a_setting_added_later_resumes_when_off(dataset, tmp_path):
    """Runs whose config.json predates a setting (here `pack`) still resume."""
    data, _ = dataset
    train.train(_config(data, tmp_path / "run", epochs=1), verbose=0)
    path = tmp_path / "run" / train.CONFIG_FILE
    saved = read_json(path)
    del saved["pack"]
    path.write_text(json.dumps(saved))
    train.train(_config(data, tmp_path / "run", epochs=1), resume=True, verbose=0)
    with pytest.raises(ValueError, match="pack"):
        train.train(_config(data, tmp_path / "run", epochs=1, pack=True), resume=True)
    # The recommended preset's cap on GenNi's candidates, added later: a cap at
    # or above the catalog (under 150 items here) changes nothing, so the run resumes;
    # a cap that bites is another run.
    del saved["max_candidates"]
    path.write_text(json.dumps(saved))
    above = _config(data, tmp_path / "run", epochs=1, max_candidates=16384)
    train.train(above, resume=True, verbose=0)
    with pytest.raises(ValueError, match="max_candidates"):
        below = _config(data, tmp_path / "run", epochs=1, max_candidates=10)
        train.train(below, resume=True, verbose=0)
    # Likewise the preset's budget of scores a step: one that leaves every item
    # scored resumes, one that cuts the candidates is another run.
    del saved["draw_budget"]
    path.write_text(json.dumps(saved))
    loose = _config(data, tmp_path / "run", epochs=1, draw_budget=1 << 27)
    train.train(loose, resume=True, verbose=0)
    with pytest.raises(ValueError, match="draw_budget"):
        tight = _config(data, tmp_path / "run", epochs=1, draw_budget=64)
        train.train(tight, resume=True, verbose=0)


def test_a_draw_budget_sets_the_candidates_genni_scores(dataset, tmp_path, capsys):
    data, _ = dataset
    loaded = Dataset.open(data)
    positions = loaded.positions_per_step(_config(data, tmp_path).batch_size)
    # The largest power of two within budget / positions, here 4.
    config = _config(data, tmp_path / "run", draw_budget=int(4.5 * positions))
    model = build_model(config, loaded)
    assert model.sampler.num_candidates == 4
    train.train(dataclasses.replace(config, epochs=1), verbose=1)
    assert "GenNi scores 4 of" in capsys.readouterr().out
    assert (
        read_json(tmp_path / "run" / train.METRICS_FILE)["history"][0]["num_candidates"]
        == 4
    )


def test_cli_train_with_config_file_and_flags(dataset, tmp_path, capsys):
    data, _ = dataset
    settings = tmp_path / "best.json"
    settings.write_text(
        json.dumps(
            {
                "alpha": 1.5,
                "hidden_size": 8,
                "num_heads": 2,
                "num_layers": 1,
                "epochs": 1,
            }
        )
    )
    out = tmp_path / "run"
    code = cli.main(
        [
            "train",
            "--data",
            data,
            "--output",
            str(out),
            "--config",
            str(settings),
            "--epochs",
            "2",
            "--strategy",
            "mirrored",  # One replica here (no GPU): the same code path.
            "--quiet",
        ]
    )
    assert code == 0
    saved = read_json(out / train.CONFIG_FILE)
    assert saved["alpha"] == 1.5 and saved["epochs"] == 2  # The flag wins.
    assert "strategy" not in saved  # How a run executes, not what it is.
    assert "test (%)" in capsys.readouterr().out
    assert cli.main(["evaluate", "--run", str(out), "--split", "valid", "--json"]) == 0
    assert "NDCG@10" in json.loads(capsys.readouterr().out)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"alpah": 1}))
    code = cli.main(
        ["train", "--data", data, "--output", str(tmp_path / "x"), "--config", str(bad)]
    )
    assert code == cli.EXIT_USAGE
    assert "Unknown training settings: alpah" in capsys.readouterr().err


def test_a_preset_is_overridden_by_the_config_file_and_then_by_flags(tmp_path):
    from genni.pipeline.cli import train_args

    def settings(*words):
        argv = ["train", "--data", "D", "--output", "O", *words]
        return train_args.config_from_args(cli.build_parser().parse_args(argv))

    recommended = settings()  # The default preset is the recommended one.
    assert recommended == settings("--preset", "recommended")
    assert (
        recommended.loss,
        recommended.sampler.num_negatives,
        recommended.sampler.alpha,
    ) == (
        "sampled_softmax",
        64,
        1.0,
    )
    assert recommended.logq_correction
    paper = settings("--preset", "paper")
    assert (paper.loss, paper.sampler.num_negatives, paper.sampler.alpha) == (
        "bce",
        1,
        2.5,
    )
    # Early stopping fits each preset's curve (benchmarks/patience.py).
    assert (recommended.patience, recommended.patience_growth) == (10, 0.5)
    assert recommended.min_steps == 1000  # A floor that binds on small logs only.
    assert (paper.patience, paper.patience_growth, paper.min_steps) == (40, 0.0, None)
    assert settings("--min-steps", "0").min_steps is None
    assert settings("--patience", "7").patience == 7
    assert settings("--patience-growth", "0").patience_growth == 0.0
    assert paper == TrainConfig.of(data="D", output="O")  # The paper's = the library's.
    file = tmp_path / "c.json"
    file.write_text(json.dumps({"num_negatives": 16, "alpha": 2.0}))
    mixed = settings("--config", str(file), "--alpha", "3")
    assert (mixed.loss, mixed.sampler.num_negatives, mixed.sampler.alpha) == (
        "sampled_softmax",
        16,
        3.0,
    )
    file.write_text(json.dumps({"preset": "paper", "num_negatives": 3}))
    named = settings("--config", str(file))  # A config file may name its preset,
    assert (named.loss, named.sampler.num_negatives, named.sampler.alpha) == (
        "bce",
        3,
        2.5,
    )
    flag = settings("--config", str(file), "--preset", "recommended")  # --preset wins.
    assert (flag.loss, flag.sampler.num_negatives) == ("sampled_softmax", 3)
    off = settings("--no-logq-correction")
    assert not off.logq_correction
    # GenNi's candidates: capped by the recommended preset, not the paper's;
    # --max-candidates 0 lifts the cap.
    assert (
        recommended.sampler.max_candidates == 16384
        and paper.sampler.max_candidates is None
    )
    assert settings("--max-candidates", "4096").sampler.max_candidates == 4096
    assert settings("--max-candidates", "0").sampler.max_candidates is None
    sampler = recommended.sampler_at(num_items=10**6)
    assert sampler.max_candidates == 16384
    # Its budget of scores a step cuts M on long histories only.
    assert (
        recommended.sampler.draw_budget == 1 << 27 and paper.sampler.draw_budget is None
    )
    assert recommended.sampler_at(num_items=10**6, positions=256 * 43.4)
    assert (
        recommended.sampler_at(num_items=10**6, positions=256 * 43.4).max_candidates
        == 8192
    )
    assert (
        recommended.sampler_at(num_items=10**6, positions=256 * 16).max_candidates
        == 16384
    )
    assert (
        recommended.sampler_at(num_items=12_101, positions=1504).max_candidates is None
    )
    # The two-level draw: off unless asked for, its C clipped to the catalog.
    assert recommended.sampler.clusters is None and paper.sampler.clusters is None
    clustered = settings("--clusters", "256", "--cluster-samples", "32")
    assert (clustered.sampler.clusters, clustered.sampler.cluster_samples) == (256, 32)
    assert clustered.sampler_at(num_items=100).clusters == 100
    assert settings("--clusters", "0").sampler.clusters is None
    with pytest.raises(ValueError, match="--clusters and --successors need"):
        settings("--clusters", "64", "--sampler", "uniform")
    # Successor candidates: off unless asked for; not with the clusters.
    assert recommended.sampler.successors is None and paper.sampler.successors is None
    assert settings("--successors", "16").sampler_at().successors == 16
    assert settings("--successors", "0").sampler.successors is None
    with pytest.raises(ValueError, match="two different GenNi draws"):
        settings("--successors", "4", "--clusters", "8")
    assert settings("--draw-budget", "0").sampler.draw_budget is None
    assert settings("--draw-budget", "1024").sampler.draw_budget == 1024
    with pytest.raises(ValueError, match="Unknown preset 'fast'"):
        file.write_text(json.dumps({"preset": "fast"}))
        settings("--config", str(file))

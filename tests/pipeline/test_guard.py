"""The guarded export: only a model at least as good as the served one is published."""

from __future__ import annotations

import json
import os

import pytest

from genni.pipeline.cli import main as cli
from genni.pipeline.serving import export, guard
from genni.pipeline.training import train
from genni.pipeline.training.config import TrainConfig
from tests.conftest import make_dataset


def _run(data, output, **overrides):
    settings = dict(
        data=data,
        output=output,
        epochs=6,
        hidden_size=16,
        num_layers=1,
        num_heads=1,
        batch_size=64,
        sampler="genni",
    )
    settings.update(overrides)
    train.train(TrainConfig.of(**settings), verbose=0)
    return output


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    data, _ = make_dataset(root, num_users=300, num_items=60, seed=5, max_len=8)
    good = _run(data, str(root / "good"))
    # One epoch at a learning rate that barely moves the weights: worse.
    bad = _run(data, str(root / "bad"), epochs=1, learning_rate=1e-6)
    return data, good, bad


def _versions(base):
    return sorted(int(v) for v in os.listdir(base) if v.isdigit())


def _decisions(base):
    with open(os.path.join(base, guard.DECISIONS_FILE)) as f:
        return [json.loads(line) for line in f]


def test_served_metrics_equal_the_run_evaluation(runs, tmp_path):
    """Asked through its top_k signature, the SavedModel scores what
    `genni evaluate` scores for the run (same split, same candidate rule)."""
    data, good, _ = runs
    decision = guard.guarded_export(
        good, str(tmp_path / "m"), against=str(tmp_path / "m"), log=lambda _: None
    )
    served = guard.savedmodel_metrics(decision["path"], data, "valid")
    want, _ = train.evaluate(good, data, "valid")
    for name in ("HR@10", "NDCG@10"):
        assert served[name] == pytest.approx(want[name], abs=1e-3), name
    # Deep in the ranking, ties and float round-off of the two graphs may swap
    # neighbours (`evaluate` puts ties ahead of the target, top_k by index).
    assert served["MRR"] == pytest.approx(want["MRR"], abs=0.1)


def test_worse_run_refused_better_published(runs, tmp_path):
    _, good, bad = runs
    base = str(tmp_path / "models")
    first = guard.guarded_export(good, base, against=base, log=lambda _: None)
    assert first["decision"] == "published" and first["served"] is None
    assert _versions(base) == [1]
    assert os.path.exists(os.path.join(first["path"], guard.DECISION_ASSET))

    refused = guard.guarded_export(bad, base, against=base, log=lambda _: None)
    assert refused["decision"] == "refused"
    assert refused["candidate"] < refused["served"] == first["candidate"]
    assert _versions(base) == [1]  # Nothing written ...
    assert not [n for n in os.listdir(base) if n.startswith(".")]  # ... or left.

    again = guard.guarded_export(good, base, against=base, log=lambda _: None)
    assert again["decision"] == "published" and again["version"] == 2
    assert _versions(base) == [1, 2]
    assert [d["decision"] for d in _decisions(base)] == [
        "published",
        "refused",
        "published",
    ]


def test_allowed_regression_publishes_a_slightly_worse_run(runs, tmp_path):
    _, good, bad = runs
    base = str(tmp_path / "models")
    guard.guarded_export(good, base, against=base, log=lambda _: None)
    tolerant = guard.guarded_export(
        bad,
        base,
        against=base,
        max_regression=100.0,
        baseline="none",  # The bad run is below popular too.
        log=lambda _: None,
    )
    assert tolerant["decision"] == "published"
    with pytest.raises(ValueError, match="max_regression"):
        guard.guarded_export(
            bad, base, against=base, max_regression=-1, log=lambda _: None
        )


def test_cli_prints_both_numbers_and_exits_3_on_refusal(runs, tmp_path, capsys):
    _, good, bad = runs
    base = str(tmp_path / "models")
    args = ["export", "--output", base, "--against", base]
    assert cli.main([*args, "--run", good]) == 0
    assert cli.main([*args, "--run", bad]) == 3
    out = capsys.readouterr().out
    assert "served none" in out and "Refused: candidate NDCG@10" in out
    assert _versions(base) == [1]
    assert (
        cli.main(["export", "--run", good, "--output", base, "--max-regression", "1"])
        == cli.EXIT_USAGE
    )


def test_a_first_candidate_below_popular_is_refused_and_popular_serves(runs, tmp_path):
    data, good, bad = runs
    base = str(tmp_path / "models")
    first = guard.guarded_export(bad, base, against=base, log=lambda _: None)
    assert first["decision"] == "refused"
    assert first["candidate"] < first["popular"]
    assert "does not beat the popularity ranking" in first["why"]
    # Nothing served: the popularity ranking does, with a model's signatures.
    assert first["fallback"] == "popular" and first["version"] == 1
    assert export.is_popular(first["path"])
    popular = guard.savedmodel_metrics(first["path"], data, "valid")
    assert round(popular["NDCG@10"], 4) == first["popular"]
    # A candidate that beats it is published next, over it.
    second = guard.guarded_export(good, base, against=base, log=lambda _: None)
    assert second["decision"] == "published" and second["version"] == 2
    assert second["candidate"] > second["popular"]
    assert second["served"] == first["popular"]  # The fallback, measured.
    assert not export.is_popular(second["path"])
    assert [d["decision"] for d in _decisions(base)] == ["refused", "published"]


def test_the_popularity_floor_holds_on_the_other_window():
    """A candidate that beats popularity on the window its epoch was chosen on
    but loses on the window it never saw is refused (a 40-user replay's case:
    valid 1.44 against 0.82, test 0.92 against 2.79)."""
    decision = {
        "split": "valid",
        "candidate": 1.44,
        "popular": 0.82,
        "floor": {"test": {"candidate": 0.92, "popular": 2.79}},
        "served": None,
        "max_regression": 0.0,
    }
    why = guard._verdict(decision)
    assert "0.92 on test does not beat the popularity ranking's 2.79" in why
    decision["floor"]["test"]["candidate"] = 3.0
    assert guard._verdict(decision) is None

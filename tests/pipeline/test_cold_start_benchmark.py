"""benchmarks/cold_start.py keeps every finished run in the project's record as
it finishes, and reads a run the record holds instead of training it again:
run directories do not survive a new machine (docs/cold_start.md)."""

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import make_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cold_start

from research import records


@pytest.fixture
def bench(tmp_path, monkeypatch):
    data, _ = make_dataset(tmp_path, num_users=40, num_items=20, seed=3, max_len=6)
    record = tmp_path / "runs.jsonl"
    monkeypatch.setattr(cold_start, "RECORD", record)
    trained = []

    def fake_train(config, resume, verbose):
        trained.append(config.output)
        # A finished run's metrics.json, as `train.train` writes and returns it.
        return {
            "config": config.to_dict(),
            "best_epoch": 3,
            "valid": {"HR@10": 10.0, "NDCG@10": 5.0},
            "test": {"HR@10": 12.5, "NDCG@10": 6.25},
            "history": [],
        }

    monkeypatch.setattr(cold_start.train, "train", fake_train)
    return data, record, trained, tmp_path / "runs"


def test_a_finished_run_is_recorded_at_once_and_never_trained_again(bench):
    data, record, trained, runs = bench
    settings = dict(epochs=5, pack=False)
    first = cold_start.run(
        data, str(runs / "a"), 0, "tower", settings, records.archived_runs(str(record))
    )
    assert trained == [str(runs / "a")]
    assert record.exists()  # Recorded when it finished, not when the table is.

    shutil.rmtree(runs, ignore_errors=True)  # A new machine: no run directory.
    again = cold_start.run(
        data, str(runs / "b"), 0, "tower", settings, records.archived_runs(str(record))
    )
    assert trained == [str(runs / "a")]  # Read from the record.
    assert again["test"] == first["test"] and again["best_epoch"] == 3

    # Another seed, variant or batch layout is another run: trained.
    kept = records.archived_runs(str(record))
    cold_start.run(data, str(runs / "c"), 1, "tower", settings, kept)
    cold_start.run(data, str(runs / "d"), 0, "default", settings, kept)
    cold_start.run(data, str(runs / "e"), 0, "tower", dict(settings, pack=True), kept)
    assert trained[1:] == [str(runs / x) for x in "cde"]
    # The record keeps one run a key, the unpacked where both are (records.py).
    assert len(records.read(str(record))) == 3

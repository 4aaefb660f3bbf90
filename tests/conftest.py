"""Test setup: Keras 2 for TFRS, quiet TensorFlow, small data made on the fly."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As the `genni` command.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gzip
import json

import pytest

# The slowest files, started first, slowest first (their summed test seconds
# on this 2-core machine, 2026-12-04: 111, 99, 90, 72, 65, 46, 43, 42, 42, 41,
# 40, 30, 30): xdist hands a file to whichever worker is free, so a long file
# left to the end would run alone on one core.
SLOW_FILES_FIRST = (
    "test_train.py",
    "test_workflow.py",
    "test_distributed.py",
    "test_guard.py",
    "test_replay.py",
    "test_multi_worker.py",
    "test_candidates.py",
    "test_batch.py",
    "test_portable.py",
    "test_report.py",
    "test_sparse_loop.py",
    "test_preprocess_e2e.py",
    "test_pretrain.py",
    "test_loop_api.py",
    "test_item_tower.py",
    "test_hold_out.py",
)


def pytest_collection_modifyitems(items) -> None:
    def rank(item) -> int:
        name = item.path.name
        return SLOW_FILES_FIRST.index(name) if name in SLOW_FILES_FIRST else 99

    items.sort(key=rank)  # Stable: each file's tests keep their order.


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "beam: the loop's preprocess step runs on Apache Beam, as it does for "
        "users (`in_memory_preprocessing` leaves it so)",
    )


@pytest.fixture
def in_memory_preprocessing(request, monkeypatch):
    """The loop's preprocess step (`genni pipeline`, `genni replay`) on the
    in-memory reference instead of Beam: the same outputs
    (test_preprocess_e2e), without Beam's ~3 s start per step. A test marked
    `beam` keeps Beam."""
    if request.node.get_closest_marker("beam"):
        return
    from genni.pipeline.preprocess import beam, inmemory

    monkeypatch.setattr(beam, "preprocess", lambda config, args: inmemory.run(config))


def review(user: str, item: str, t: int, rating: float = 5.0) -> str:
    return json.dumps(
        {"reviewerID": user, "asin": item, "overall": rating, "unixReviewTime": t}
    )


@pytest.fixture
def write_log(tmp_path):
    """Write lines to a (gzip) file under tmp_path; returns its path."""

    def write(lines, name="reviews.json.gz"):
        path = tmp_path / name
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        return str(path)

    return write


def make_dataset(root, num_users, num_items, seed, max_len):
    """A small synthetic log preprocessed (in memory) under `root`: (dir, stats)."""
    from genni.pipeline.preprocess import inmemory, synthetic
    from genni.pipeline.preprocess.config import PreprocessConfig

    log = str(root / "log.json.gz")
    config = synthetic.SyntheticConfig(
        num_users=num_users, num_items=num_items, noise_users=0, seed=seed
    )
    synthetic.write_log(config, log)
    out = str(root / "data")
    return out, inmemory.run(PreprocessConfig(input=log, output=out, max_len=max_len))


def tiny_config(data, output, **settings):
    """The `TrainConfig` of a small test run on `data` into `output`: one
    layer, two heads, batches of 64, dropout 0.1; `settings` over these."""
    from genni.pipeline.training.config import TrainConfig

    values = dict(
        data=data,
        output=str(output),
        num_layers=1,
        num_heads=2,
        batch_size=64,
        dropout=0.1,
        attention_dropout=0.1,
    )
    return TrainConfig.of(**(values | settings))


def train_and_export(
    root,
    *,
    num_users,
    num_items,
    seed,
    max_len=8,
    hidden_size=16,
    heads=1,
    encoder="sasrec",
):
    """A one-epoch tiny run of `encoder` (by default 16 wide, one head) on a
    synthetic dataset (histories of at most 8 by default), exported with k=5:
    (run dir, MODEL_BASE, version path, item ids)."""
    from genni.pipeline.serving import export
    from genni.pipeline.training import train
    from genni.pipeline.training.config import TrainConfig

    data, _ = make_dataset(root, num_users, num_items, seed, max_len)
    run = str(root / "run")
    config = TrainConfig.of(
        data=data,
        output=run,
        epochs=1,
        hidden_size=hidden_size,
        num_layers=1,
        num_heads=heads,
        batch_size=64,
        encoder=encoder,
    )
    train.train(config, verbose=0)
    base = str(root / "models")
    path = export.export(run, base, k=5)
    with open(os.path.join(data, "items.txt")) as f:
        items = f.read().splitlines()
    return run, base, path, items

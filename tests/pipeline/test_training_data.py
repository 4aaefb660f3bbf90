"""What the sampler learns from the data holds no held-out event: the
successor table and the item counts come from the training prefixes only."""

import numpy as np

from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training.data import Dataset

USERS, TRAIN_ITEMS, HELD_OUT_ITEMS = 60, 12, 4


def _held_out_only_log(path):
    """Each user: six items of the training pool, then a validation and a
    test target from a pool no training prefix ever holds ("h0".."h3")."""
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        for user in range(USERS):
            train = rng.choice(TRAIN_ITEMS, 6, replace=False)
            valid, test = rng.choice(HELD_OUT_ITEMS, 2, replace=False)
            items = [f"t{i}" for i in train] + [f"h{valid}", f"h{test}"]
            f.write(f"u{user} {' '.join(items)}\n")


def test_no_validation_or_test_target_reaches_the_successors_or_counts(tmp_path):
    log = str(tmp_path / "log.txt")
    _held_out_only_log(log)
    data = str(tmp_path / "data")
    inmemory.run(PreprocessConfig(input=log, output=data, max_len=10))
    dataset = Dataset.open(data)
    ids = dataset.ids("items.txt")
    held_out = [i for i, raw in enumerate(ids) if raw.startswith("h")]
    trained = [i for i, raw in enumerate(ids) if raw.startswith("t")]
    assert len(held_out) == HELD_OUT_ITEMS and len(trained) == TRAIN_ITEMS
    table = dataset.successor_table(4)
    # No held-out target is anyone's successor, nor has any ...
    assert not np.isin(table, held_out).any()
    assert not table[held_out].any()
    # ... while the training pairs fill the table.
    assert np.isin(table[trained], trained).all()
    counts = dataset.item_counts()
    assert counts[trained].sum() == USERS * 6 and not counts[held_out].any()


def test_every_dataset_it_builds_runs_without_tf_datas_autotuner(tmp_path):
    """The autotuner's thread holds up each epoch's end
    (`data.quiet_options`): training, evaluation and the guard's
    batches are built without it, and the training batches keep the
    multi-worker sharding by data."""
    import tensorflow as tf

    from genni.components import schema
    from genni.pipeline.training import data as training_data

    log = str(tmp_path / "log.txt")
    _held_out_only_log(log)
    data = str(tmp_path / "data")
    inmemory.run(PreprocessConfig(input=log, output=data, max_len=10))
    dataset = Dataset.open(data)
    cached = dataset.records(schema.TRAIN)
    built = {
        f"train, pack={pack}": training_data.train_dataset(
            cached, dataset.max_len, 8, 0, 0, pack=pack
        )
        for pack in (False, True)
    }
    built.update(
        {split: dataset.batches(split, 8) for split in (schema.VALID, schema.TEST)}
    )
    for name, batches in built.items():
        assert batches.options().autotune.enabled is False, name
        assert next(iter(batches)), name  # Still yields batches.
    for pack in (False, True):
        policy = built[f"train, pack={pack}"].options().experimental_distribute
        assert policy.auto_shard_policy == tf.data.experimental.AutoShardPolicy.DATA

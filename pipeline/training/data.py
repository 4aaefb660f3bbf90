"""tf.data input: the TFRecords of `genni preprocess` as batches of features."""

from __future__ import annotations

import glob

import numpy as np
import tensorflow as tf

from genni.components import schema

SHUFFLE_SEED_STRIDE = 1_000_003


def _files(data_dir: str, split: str) -> list[str]:
    files = sorted(glob.glob(schema.split_pattern(data_dir, split)))
    if not files:
        raise FileNotFoundError(
            f"No {split} TFRecords in {data_dir!r}: run `genni preprocess` first."
        )
    return files


def records(data_dir: str, split: str) -> tf.data.Dataset:
    """Serialized examples of one split, cached in memory after the first pass."""
    return tf.data.TFRecordDataset(_files(data_dir, split), compression_type="GZIP")


def batches(
    dataset: tf.data.Dataset, max_len: int, split: str, batch_size: int
) -> tf.data.Dataset:
    spec = schema.feature_spec(max_len, split)
    return (
        dataset.batch(batch_size)
        .map(
            lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE
        )
        .prefetch(tf.data.AUTOTUNE)
    )


def train_dataset(
    cached: tf.data.Dataset,
    max_len: int,
    batch_size: int,
    seed: int,
    epoch: int,
    num_examples: int | None = None,
    pack: bool = False,
) -> tf.data.Dataset:
    """One epoch of training batches, shuffled by (seed, epoch) alone.

    The order depends on nothing else, so a resumed run sees the same batches
    as an uninterrupted one. `pack`: each batch's sequences packed into as few
    rows as fit (`genni.components.packing`).
    """
    shuffled = cached.shuffle(
        buffer_size=1 << 20,
        seed=seed * SHUFFLE_SEED_STRIDE + epoch,
        reshuffle_each_iteration=False,
    )
    if num_examples is not None:  # Lets progress bars show the epoch length.
        shuffled = shuffled.apply(tf.data.experimental.assert_cardinality(num_examples))
    out = batches(shuffled, max_len, schema.TRAIN, batch_size)
    if pack:
        from genni.components import packing

        out = out.map(
            lambda features: packing.pack_features(features, max_len),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        ).prefetch(tf.data.AUTOTUNE)
    # Several workers (MultiWorkerMirroredStrategy) each build this same
    # order and keep their share of its batches; the split is one file.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return out.with_options(options)


def item_counts(data_dir: str, max_len: int, num_items: int) -> np.ndarray:
    """[num_items + 1] interaction counts over the training portion.

    The valid split's history is s_1..s_{n-2}, exactly what training sees.
    """
    counts = np.zeros(num_items + 1, dtype=np.int64)
    for batch in batches(records(data_dir, schema.VALID), max_len, schema.VALID, 1024):
        ids = batch[schema.HISTORY].flat_values.numpy()
        counts += np.bincount(ids, minlength=num_items + 1)
    return counts

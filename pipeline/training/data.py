"""tf.data input: the TFRecords of `genni preprocess` as batches of features."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import numpy as np
import tensorflow as tf

from genni.components import schema
from genni.components.samplers import budget, successors

SHUFFLE_SEED_STRIDE = 1_000_003


def quiet_options() -> tf.data.Options:
    """Options for every dataset built here: tf.data's autotuner switched off.

    `genni train` drops each epoch's dataset iterator as its `fit` ends, and
    the iterator's destructor waits on the autotuner's optimization thread,
    asleep on a timed wait that doubles up to 60 s: a Beauty epoch of 12 s of
    steps took 20 s of wall time with it, 12.7 s without, the steps themselves
    as fast (`benchmarks/epoch_wall.py`). Parallel maps asked for AUTOTUNE
    then run on as many threads as tf.data's pool has (the cores).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return options


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
        .with_options(quiet_options())
    )


def _shuffled(cached: tf.data.Dataset, seed: int, epoch: int) -> tf.data.Dataset:
    """The training examples in epoch `epoch`'s order (Python ints: a tensor
    seed fails in TensorFlow's seed logic when the global seed is 0)."""
    return cached.shuffle(
        buffer_size=1 << 20,
        seed=seed * SHUFFLE_SEED_STRIDE + epoch,
        reshuffle_each_iteration=False,
    )


def _finish_training_batches(
    batched: tf.data.Dataset, max_len: int, pack: bool
) -> tf.data.Dataset:
    spec = schema.feature_spec(max_len, schema.TRAIN)
    out = batched.map(
        lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE
    )
    if pack:
        from genni.components import packing

        out = out.map(
            lambda features: packing.pack_features(features, max_len),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    # Several workers (MultiWorkerMirroredStrategy) each build this same
    # order and keep their share of its batches; the split is one file.
    options = quiet_options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return out.prefetch(tf.data.AUTOTUNE).with_options(options)


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
    shuffled = _shuffled(cached, seed, epoch)
    if num_examples is not None:  # Lets progress bars show the epoch length.
        shuffled = shuffled.apply(tf.data.experimental.assert_cardinality(num_examples))
    return _finish_training_batches(shuffled.batch(batch_size), max_len, pack)


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
    """Batches in one epoch of `num_examples` (the last one may be short)."""
    return max(1, -(-num_examples // batch_size))


def item_counts(data_dir: str, max_len: int, num_items: int) -> np.ndarray:
    """[num_items + 1] interaction counts over the training sequences
    (`training_sequences`): nothing held out is counted."""
    counts = np.zeros(num_items + 1, dtype=np.int64)
    for ids, _ in _training_histories(data_dir, max_len):
        counts += np.bincount(ids, minlength=num_items + 1)
    return counts


def successor_table(data_dir: str, max_len: int, num_items: int, size: int):
    """[num_items + 1, size] each item's most frequent successors over the
    training sequences (`training_sequences`, as `item_counts`)."""
    histories = _training_histories(data_dir, max_len)
    return successors.successor_table(histories, num_items, size)


def training_sequences(data_dir: str, max_len: int):
    """Each user's whole training sequence, 1,024 users at a time, as a
    ragged int64 tensor. Leave-one-out: the valid split's histories,
    s_1..s_{n-2}, exactly what training sees; split by time: the train
    split's sequences (its history and target), for the valid cases' histories
    hold events of the validation window."""
    if schema.DatasetInfo.load(data_dir).split == schema.TIME_SPLIT:
        for batch in batches(
            records(data_dir, schema.TRAIN), max_len, schema.TRAIN, 1024
        ):
            history = batch[schema.HISTORY]
            target = tf.RaggedTensor.from_tensor(
                batch[schema.TARGET][:, None],
                row_splits_dtype=history.row_splits.dtype,
            )
            yield tf.concat([history, target], axis=1)
        return
    for batch in batches(records(data_dir, schema.VALID), max_len, schema.VALID, 1024):
        yield batch[schema.HISTORY]


def _training_histories(data_dir: str, max_len: int):
    """`training_sequences` as (item ids, row splits) numpy pairs."""
    for sequences in training_sequences(data_dir, max_len):
        yield sequences.flat_values.numpy(), sequences.row_splits.numpy()


class Dataset:
    """A preprocessed dataset, opened once and passed to whatever reads it.

    Holds its `DatasetInfo` and reads each part on first use, then keeps it:
    the splits' records (cached in memory after their first pass), the item
    counts, the raw ids and `stats.json`.
    """

    def __init__(self, info: schema.DatasetInfo):
        self.info = info
        self._records: dict[str, tf.data.Dataset] = {}
        self._item_counts: np.ndarray | None = None
        self._successors: dict[int, np.ndarray] = {}
        self._stats: dict | None = None
        self._ids: dict[str, list[str]] = {}

    @classmethod
    def open(cls, path: str) -> Dataset:
        """The output of `genni preprocess` at `path` (a clear error if not)."""
        return cls(schema.DatasetInfo.load(path))

    @property
    def path(self) -> str:
        return self.info.data_dir

    @property
    def max_len(self) -> int:
        return self.info.max_len

    @property
    def num_items(self) -> int:
        return self.info.num_items

    def records(self, split: str) -> tf.data.Dataset:
        """Serialized examples of `split`, kept in memory after the first pass."""
        if split not in self._records:
            self._records[split] = records(self.path, split).cache()
        return self._records[split]

    def batches(self, split: str, batch_size: int) -> tf.data.Dataset:
        """Parsed batches of `split`, in file order."""
        return batches(self.records(split), self.max_len, split, batch_size)

    def num_train_examples(self) -> int:
        if self.info.num_train_examples is None:  # Older stats.json: count once.
            count = sum(1 for _ in self.records(schema.TRAIN))
            self.info = dataclasses.replace(self.info, num_train_examples=count)
        return self.info.num_train_examples

    def positions_per_step(self, batch_size: int) -> float:
        """Mean target positions in a training batch (`positions_per_step`)."""
        stats = self.stats()
        return budget.positions_per_step(
            stats["events"], stats["users"], self.max_len, batch_size
        )

    def item_counts(self) -> np.ndarray:
        """[num_items + 1] interaction counts over the training portion."""
        if self._item_counts is None:
            self._item_counts = item_counts(self.path, self.max_len, self.num_items)
        return self._item_counts

    def successor_table(self, size: int) -> np.ndarray:
        """[num_items + 1, size] each item's most frequent successors in
        training (`genni.components.samplers.successors`), built once a size."""
        if size not in self._successors:
            self._successors[size] = successor_table(
                self.path, self.max_len, self.num_items, size
            )
        return self._successors[size]

    def cold_items(self) -> np.ndarray:
        """The ids of the items whose test cases are reported apart: those
        held out (`genni preprocess --hold-out-items`), else those no
        training sequence holds (met as validation or test targets only)."""
        hold_out = self.stats().get("hold_out")
        if hold_out:
            from genni.pipeline.preprocess.sequences import held_out_items

            drawn = hold_out.get("drawn_from", self.num_items)
            items = self.ids(schema.ITEMS_FILE)[1 : drawn + 1]
            return np.array(
                sorted(held_out_items(items, hold_out["share"], hold_out["seed"])),
                dtype=np.int64,
            )
        return self.untrained_items()

    def untrained_items(self) -> np.ndarray:
        """The ids of the items no training sequence holds."""
        return np.flatnonzero(self.item_counts()[1:] == 0) + 1

    def item_attributes(self) -> dict | None:
        """{item id (1-based, a string): [attribute, ...]} of
        `item_attributes.json` (`genni preprocess --item-attributes`), or None
        without one."""
        path = os.path.join(self.path, schema.ITEM_ATTRIBUTES_FILE)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def item_features(self):
        """The items' attributes (`genni.models.item_tower.ItemFeatures`) from
        `item_attributes`; an item no training sequence holds has no trained
        ID row."""
        from genni.models.item_tower import item_features

        attributes = self.item_attributes()
        if attributes is None:
            raise FileNotFoundError(
                f"--item-tower reads the items' attributes, and {self.path!r} has "
                f"none ({schema.ITEM_ATTRIBUTES_FILE}): preprocess with "
                "--item-attributes."
            )
        untrained = set(self.untrained_items().tolist())
        return item_features(attributes, self.num_items, untrained)

    def stats(self) -> dict:
        """`stats.json` as `genni preprocess` wrote it."""
        if self._stats is None:
            with open(os.path.join(self.path, schema.STATS_FILE)) as f:
                self._stats = json.load(f)
        return self._stats

    def ids(self, name: str) -> list[str]:
        """Raw ids of `items.txt` or `users.txt` (`schema.ITEMS_FILE`, ...):
        element n is id n, element 0 the padding id ""."""
        if name not in self._ids:
            with open(os.path.join(self.path, name), encoding="utf-8") as f:
                self._ids[name] = ["", *f.read().splitlines()]
        return self._ids[name]

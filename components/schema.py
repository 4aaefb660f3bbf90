"""The one data contract between preprocessing, training and serving.

`genni preprocess` writes what this module describes; the model input pipeline
and the serving signature read it through the same names. Nothing else in the
project spells a feature key or an output file name.

Under leave-one-out every split holds one `tf.train.Example` per user; under
the split by time (`stats.json`'s `split`: "time") train holds one per user
with training events, valid and test one per event of their window (a
`target` of 0 is an item unknown before the cutoff: a miss):

| feature      | dtype | shape     | meaning                                     |
|--------------|-------|-----------|---------------------------------------------|
| `user_id`    | int64 | []        | 1-based line of `users.txt`                 |
| `input_ids`  | int64 | [max_len] | input items, last `max_len`, left-padded    |
| `target_ids` | int64 | [max_len] | next item at each input position (0: pad)   |
| `target`     | int64 | []        | the item to predict after the last input    |
| `history`    | int64 | [None]    | the whole input, untruncated (masks seen)   |
| `user_items` | int64 | [None]    | items of the training prefix, sorted (train)|

Item ids run 1..num_items (line i of `items.txt` holds item i); 0 is padding.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

PADDING_ID = 0
DEFAULT_MAX_LEN = 50
DEFAULT_MIN_COUNT = 5

# Feature keys.
USER_ID = "user_id"
INPUT_IDS = "input_ids"
TARGET_IDS = "target_ids"
TARGET = "target"
HISTORY = "history"
USER_ITEMS = "user_items"

# How `genni preprocess` held out its evaluation cases (`--split`).
LEAVE_ONE_OUT = "leave_one_out"
TIME_SPLIT = "time"

# Splits, in the leave-one-out order of the protocol.
TRAIN = "train"
VALID = "valid"
TEST = "test"
SPLITS = (TRAIN, VALID, TEST)

# Files that `genni preprocess` writes into its output directory.
TFRECORD_SUFFIX = ".tfrecord.gz"
ITEMS_FILE = "items.txt"
USERS_FILE = "users.txt"
SEQUENCES_FILE = "sequences.tsv"
STATS_FILE = "stats.json"
ITEM_ATTRIBUTES_FILE = "item_attributes.json"
DEAD_LETTER_DIR = "dead_letter"
DEAD_LETTER_PREFIX = "dead_letter"

# 2: `user_items` holds the training prefix only (1: the whole sequence, with
# the held-out valid and test targets); `stats.json` has `repeats`.
SCHEMA_VERSION = 2


def split_pattern(data_dir: str, split: str) -> str:
    """Glob of the TFRecord shards of `split` in `data_dir`."""
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}. Got {split!r}.")
    return os.path.join(data_dir, f"{split}-*{TFRECORD_SUFFIX}")


def feature_spec(max_len: int, split: str = TRAIN) -> dict[str, Any]:
    """`tf.io.parse_example` spec of one split (TensorFlow is imported lazily)."""
    import tensorflow as tf

    spec: dict[str, Any] = {
        USER_ID: tf.io.FixedLenFeature([], tf.int64),
        INPUT_IDS: tf.io.FixedLenFeature([max_len], tf.int64),
        TARGET_IDS: tf.io.FixedLenFeature([max_len], tf.int64),
        TARGET: tf.io.FixedLenFeature([], tf.int64),
        HISTORY: tf.io.RaggedFeature(tf.int64),
    }
    if split == TRAIN:
        spec[USER_ITEMS] = tf.io.RaggedFeature(tf.int64)
    return spec


def read_stats(data_dir: str) -> dict:
    """`stats.json` of a `genni preprocess` output (a clear error if not)."""
    path = os.path.join(data_dir, STATS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} not found: is {data_dir!r} the output of `genni preprocess`?"
        )
    with open(path) as f:
        return json.load(f)


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a later stage needs to know about a preprocessed dataset."""

    data_dir: str
    num_users: int
    num_items: int
    max_len: int
    num_train_examples: int | None = None
    schema_version: int = SCHEMA_VERSION
    # LEAVE_ONE_OUT: one valid and one test case a user, the valid case's
    # history exactly the training sequence; TIME_SPLIT: every event of the
    # windows a case, the training sequences only in the train split.
    split: str = LEAVE_ONE_OUT

    @property
    def vocab_size(self) -> int:
        """Rows of an item embedding table: the items plus the padding row."""
        return self.num_items + 1

    @classmethod
    def load(cls, data_dir: str) -> DatasetInfo:
        stats = read_stats(data_dir)
        return cls(
            data_dir=data_dir,
            num_users=int(stats["users"]),
            num_items=int(stats["items"]),
            max_len=int(stats["max_len"]),
            num_train_examples=stats.get("examples", {}).get(TRAIN),
            schema_version=int(stats.get("schema_version", 1)),
            split=stats.get("split", LEAVE_ONE_OUT),
        )

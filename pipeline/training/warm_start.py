"""`genni train --warm-start RUN`: start from another run's best weights.

The nightly loop retrains on a log that grew: its dataset keeps the earlier
ids (`genni preprocess --previous`) and adds new items after them. The encoder
starts from RUN's best weights; the item table grows to the new vocabulary,
its earlier rows copied, so the old items score at step 0 as they did under
RUN, and its new rows set by `warm_start_rows`:

- "random": as a fresh run initialises them (the encoder's own initializer);
- "mean": the mean of RUN's item rows, so a new item starts as an average one.

The optimizer starts afresh, and early stopping follows the new validation
window. The run's `config.json` records what it started from.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from genni.components import schema
from genni.models.config import build_encoder
from genni.pipeline.preprocess import outputs
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig

BEST_WEIGHTS = os.path.join("best", "weights")


def initialize(encoder, config: TrainConfig) -> dict:
    """Load `config.warm_start`'s best encoder into `encoder` (built), the
    item table grown as the module says; returns what was done."""
    run = config.warm_start
    path = os.path.join(run, BEST_WEIGHTS)
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(
            f"--warm-start {run!r} has no best weights ({path}): is it a "
            "finished `genni train` run?"
        )
    previous = TrainConfig.from_dict(rundir.read_json(os.path.join(run, "config.json")))
    info = schema.DatasetInfo.load(previous.data)
    if info.max_len != encoder.max_len:
        raise ValueError(
            f"--warm-start {run!r} reads {info.max_len} items a history, this "
            f"dataset {encoder.max_len}: preprocess with the same --max-len."
        )
    differ = previous.encoder(info).weight_differences(config.encoder(info))
    if differ:
        raise ValueError(
            f"--warm-start {run!r} has other model settings (it vs this run): "
            f"{', '.join(differ)}."
        )
    _, known = outputs.read_vocabulary(previous.data)
    _, items = outputs.read_vocabulary(config.data)
    if items[: len(known)] != known:  # Row i must be the same item in both.
        raise ValueError(
            f"{config.data!r} numbers its items otherwise than {previous.data!r}, "
            f"the data of --warm-start {run!r}: preprocess it with --previous "
            f"{previous.data}."
        )
    old = build_encoder(previous.encoder(info))
    if previous.model.item_tower:
        from genni.pipeline.training.data import Dataset
        from genni.pipeline.training.model import attach_item_tower

        attach_item_tower(old, previous, Dataset.open(previous.data))
    old(tf.zeros([1, info.max_len], tf.int64))
    # The run saved its whole model; its encoder is at `model.encoder`.
    tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=old)).read(
        path
    ).expect_partial().assert_existing_objects_matched()
    table = encoder.id_table
    # Grown or this dataset's own: the ID rows, and an item tower's rows
    # and data (`_grow_tower`).
    skip = {id(table)}
    if encoder.item_tower is not None:
        skip |= {id(w) for w in encoder.item_tower.weights}
    for old_weight, weight in zip(old.weights, encoder.weights, strict=True):
        if id(weight) not in skip:
            weight.assign(old_weight)
    rows = old.id_table.numpy()
    grown = table.numpy()
    grown[: len(rows)] = rows
    new = grown.shape[0] - len(rows)
    if new and config.warm_start_rows == "mean":
        grown[len(rows) :] = rows[1:].mean(axis=0)  # Row 0 is padding.
    table.assign(grown.astype(np.float32))
    if encoder.item_tower is not None:
        _grow_tower(old.item_tower, encoder.item_tower, len(rows))
    return {"run": run, "items": info.num_items, "new_items": new}


def _grow_tower(old, tower, known_rows: int) -> None:
    """An item tower's attribute rows from `old`'s, matched by attribute
    (a new attribute keeps its fresh row); the items RUN had a trained ID row
    for keep it (`id_rows`), whether or not this dataset's training meets
    them."""
    old_rows = old.attribute_embedding.embeddings.numpy()
    rows = tower.attribute_embedding.embeddings.numpy()
    at = {name: n + 1 for n, name in enumerate(old.names)}
    for n, name in enumerate(tower.names, start=1):
        if name in at:
            rows[n] = old_rows[at[name]]
    tower.attribute_embedding.embeddings.assign(rows)
    id_rows = tower.id_rows.numpy()
    id_rows[:known_rows] = np.maximum(id_rows[:known_rows], old.id_rows.numpy())
    tower.id_rows.assign(id_rows)

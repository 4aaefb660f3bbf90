"""`genni pretrain`: S3-Rec pre-training; `genni train --init-from` fine-tunes.

Examples, as in the S3-Rec code: every prefix of each user's training sequence
(s_1..s_{n-2}, its last `max_len` items; nothing of the validation or test
targets). Masks, segments and negative segments are drawn per epoch from
(seed, epoch) alone, so a resumed run sees the same batches.

A pre-training directory holds:

| path            | what                                                 |
|-----------------|------------------------------------------------------|
| `config.json`   | the `PretrainConfig`                                  |
| `checkpoints/`  | model, optimizer and generators, per epoch            |
| `state.json`    | epochs done, losses and seconds per epoch             |
| `encoder.npz`   | the encoder's weights by layer path, after each epoch |
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

from genni.components import schema
from genni.components.samplers import build_sampler
from genni.models import s3rec
from genni.models.config import build_encoder
from genni.models.encoders import SequenceEncoder
from genni.models.encoders import registry as encoders
from genni.pipeline.training import data, rundir
from genni.pipeline.training.config import (
    PretrainConfig,
    TrainConfig,
    refuse_output_in_data,
)

CONFIG_FILE = rundir.CONFIG_FILE
STATE_FILE = rundir.STATE_FILE
ENCODER_FILE = "encoder.npz"
# The item tower's weights (`genni.models.item_tower`): no pre-training holds
# them, a run with a tower starts them afresh.
TOWER_PREFIX = "item_tower/"
CHECKPOINT_DIR = "checkpoints"


def load_attributes(data_dir: str, num_items: int) -> tuple[np.ndarray, list[str]]:
    """[num_items + 1, L] attribute ids (1-based, 0-padded) and the vocabulary.

    Reads `item_attributes.json` of `genni preprocess --item-attributes` (from
    S3-Rec, Amazon or Yelp metadata); attribute values are strings or numbers.
    """
    path = os.path.join(data_dir, schema.ITEM_ATTRIBUTES_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} not found: pre-training needs item attributes; run `genni "
            "preprocess` with --item-attributes."
        )
    with open(path) as f:
        by_item = json.load(f)
    vocabulary = sorted({str(a) for values in by_item.values() for a in values})
    if not vocabulary:
        raise ValueError(f"{path} lists no attributes.")
    index = {a: i + 1 for i, a in enumerate(vocabulary)}
    width = max(len(set(map(str, v))) for v in by_item.values())
    table = np.zeros([num_items + 1, width], dtype=np.int64)
    for item, values in by_item.items():
        ids = sorted({index[str(a)] for a in values})
        table[int(item), : len(ids)] = ids
    return table, vocabulary


def training_sequences(data_dir: str, max_len: int) -> list[np.ndarray]:
    """Each user's training sequence (`data.training_sequences`: under
    leave-one-out s_1..s_{n-2}), its last `max_len` items."""
    sequences = []
    for batch in data.training_sequences(data_dir, max_len):
        for row in batch.to_list():
            sequences.append(np.asarray(row[-max_len:], dtype=np.int64))
    return sequences


def prefixes(sequences: list[np.ndarray], max_len: int) -> np.ndarray:
    """Every prefix of each sequence's last `max_len` items, left-padded."""
    sequences = [s[-max_len:] for s in sequences]
    total = sum(len(s) for s in sequences)
    out = np.zeros([total, max_len], dtype=np.int64)
    row = 0
    for seq in sequences:
        for end in range(1, len(seq) + 1):
            out[row, max_len - end :] = seq[:end]
            row += 1
    return out


def shuffled_order(
    lengths: np.ndarray, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """A random order whose consecutive batches hold sequences of like length.

    Rows are shuffled, sorted by length within pools of 50 batches, cut into
    batches, and the batches shuffled: every batch is still a random draw,
    but short prefixes (most of them) travel together, and the model cuts
    each batch to its longest sequence instead of max_len.
    """
    order = rng.permutation(len(lengths))
    pool = 50 * batch_size
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        order[start : start + pool] = chunk[np.argsort(lengths[chunk], kind="stable")]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return np.concatenate([batches[i] for i in rng.permutation(len(batches))])


def epoch_features(
    rows: np.ndarray,
    long_sequence: np.ndarray,
    mask_probability: float,
    seed: int,
    epoch: int,
    batch_size: int | None = None,
) -> dict[str, np.ndarray]:
    """Shuffled examples with their masks and segments for one epoch.

    Masked items: each real position with probability `mask_probability`, and
    always the last one. Segment: for sequences of length L >= 2 a random span
    of 1..L//2 items; the negative segment is a span of the same length from
    the concatenation of all training sequences. With `batch_size`, batches
    group sequences of like length (`shuffled_order`).
    """
    rng = np.random.default_rng([seed, epoch])
    lengths = (rows > schema.PADDING_ID).sum(axis=1)
    if batch_size is None:
        order = rng.permutation(len(rows))
    else:
        order = shuffled_order(lengths, batch_size, rng)
    rows, lengths = rows[order], lengths[order]
    count, width = rows.shape
    real = rows > schema.PADDING_ID
    masked = (rng.random(rows.shape) < mask_probability) & real
    masked[:, -1] = real[:, -1]
    span = np.maximum(lengths // 2, 1)
    span_length = 1 + np.floor(rng.random(count) * span).astype(np.int64)
    start = np.floor(rng.random(count) * (lengths - span_length + 1)).astype(np.int64)
    negative_start = np.floor(
        rng.random(count) * (len(long_sequence) - span_length + 1)
    ).astype(np.int64)
    offset = np.arange(width)[None, :] - (width - lengths)[:, None] - start[:, None]
    segment = (offset >= 0) & (offset < span_length[:, None]) & (lengths >= 2)[:, None]
    negative = np.where(
        segment,
        long_sequence[
            np.clip(negative_start[:, None] + offset, 0, len(long_sequence) - 1)
        ],
        0,
    )
    return {
        s3rec.SEQUENCE: rows,
        s3rec.MASKED: masked,
        s3rec.SEGMENT: segment,
        s3rec.NEGATIVE_SEGMENT: negative,
    }


def build_pretrainer(
    config: PretrainConfig, info: schema.DatasetInfo, attributes: np.ndarray
) -> s3rec.S3RecPretrainer:
    if not encoders.get(config.model.encoder).pretrainable:
        raise ValueError(
            f"The {config.model.encoder!r} encoder has no S3-Rec pre-training: "
            f"train it from scratch (choose one of {encoders.pretrainable()} to "
            "pre-train)."
        )
    encoder = build_encoder(config.encoder(info))
    sampler = build_sampler(
        config.sampler_config(), info.num_items, config.sampler_seed
    )
    model = s3rec.S3RecPretrainer(
        encoder,
        attributes,
        int(attributes.max()),
        sampler,
        weights=config.weights,
        seed=config.seed,
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(config.learning_rate))
    zeros = np.zeros([1, info.max_len], np.int64)
    model(
        {
            s3rec.SEQUENCE: zeros + 1,
            s3rec.MASKED: zeros > 0,
            s3rec.SEGMENT: zeros > 0,
            s3rec.NEGATIVE_SEGMENT: zeros,
        }
    )
    # The optimizer's variables too, so that `fit` traces its step once.
    model.optimizer.build(model.trainable_variables)
    return model


def pretrain(
    config: PretrainConfig,
    resume: bool = False,
    verbose: int = 1,
    strategy: tf.distribute.Strategy | None = None,
) -> dict:
    """Pre-train for `config.epochs`; returns the final state (losses, times).

    `strategy`: a single-machine `tf.distribute` strategy (MirroredStrategy)
    to build and train under; `config.batch_size` is then the global batch.
    Raises `rundir.RunBusyError` while another process trains in
    `config.output`.
    """
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError(
            "genni pretrain runs on one machine: use --strategy default or mirrored."
        )
    refuse_output_in_data(config.output, config.data)
    with rundir.claim(config.output):
        return _pretrain(config, resume, verbose, strategy)


def _pretrain(
    config: PretrainConfig,
    resume: bool,
    verbose: int,
    strategy: tf.distribute.Strategy | None,
) -> dict:
    info = schema.DatasetInfo.load(config.data)
    attributes, vocabulary = load_attributes(config.data, info.num_items)
    state = rundir.prepare(
        config.output,
        config.to_dict(),
        resume,
        {"epoch": 0, "history": [], "checkpoint": None},
    )
    tf.keras.utils.set_random_seed(config.seed)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = build_pretrainer(config, info, attributes)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(config.output, CHECKPOINT_DIR), max_to_keep=2
        )
        if state["checkpoint"]:
            checkpoint.restore(state["checkpoint"]).assert_existing_objects_matched()
            print(f"Resumed {config.output} at epoch {state['epoch']}.")
    sequences = training_sequences(config.data, info.max_len)
    rows = prefixes(sequences, info.max_len)
    long_sequence = np.concatenate(sequences)
    if verbose:
        print(
            f"{len(rows):,} pre-training sequences, {len(vocabulary):,} attributes, "
            f"{info.num_items:,} items."
        )
    state["examples"] = len(rows)
    state["attributes"] = len(vocabulary)
    while state["epoch"] < config.epochs:
        epoch = state["epoch"]
        if verbose:
            print(f"Epoch {epoch + 1}/{config.epochs}")
        features = epoch_features(
            rows,
            long_sequence,
            config.mask_probability,
            config.seed,
            epoch,
            config.batch_size,
        )
        dataset = (
            tf.data.Dataset.from_tensor_slices(features)
            .batch(config.batch_size)
            .prefetch(tf.data.AUTOTUNE)
            .with_options(data.quiet_options())
        )
        start = time.perf_counter()
        logs = model.fit(dataset, epochs=1, verbose=verbose).history
        record = {"epoch": epoch + 1, "seconds": time.perf_counter() - start}
        record.update({k: float(v[-1]) for k, v in logs.items()})
        state["history"].append(record)
        state["epoch"] = epoch + 1
        state["checkpoint"] = manager.save(checkpoint_number=epoch + 1)
        s3rec.save_encoder_weights(
            model.encoder, os.path.join(config.output, ENCODER_FILE)
        )
        state["seconds_per_epoch"] = statistics.median(
            r["seconds"] for r in state["history"]
        )
        rundir.write_json(os.path.join(config.output, STATE_FILE), state)
    return state


def read_config(pretrain_dir: str) -> PretrainConfig:
    path = os.path.join(pretrain_dir, CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} not found: is {pretrain_dir!r} the output of `genni pretrain`?"
        )
    saved = rundir.read_json(path)
    if "loss" in saved and "mask_probability" not in saved:
        raise ValueError(
            f"{pretrain_dir!r} is a `genni train` run, not a `genni pretrain` "
            "output: --init-from takes a pre-training; start from a run with "
            "--warm-start."
        )
    return PretrainConfig.from_dict(saved)


def initialize(encoder: SequenceEncoder, config: TrainConfig) -> list[str]:
    """Load `config.init_from`'s encoder weights into a fine-tuning model."""
    pretrained = read_config(config.init_from)
    # Only the settings that shape the weights must agree (`WEIGHT_FIELDS`).
    info = schema.DatasetInfo(config.data, 0, encoder.num_items, encoder.max_len)
    # A pre-training knows items by their IDs: a run with an item tower takes
    # its encoder and starts the tower's attribute rows afresh.
    fitted = dataclasses.replace(pretrained.encoder(info), item_tower=False)
    wanted = dataclasses.replace(config.encoder(info), item_tower=False)
    different = fitted.weight_differences(wanted)
    if different:
        raise ValueError(
            f"--init-from {config.init_from!r} was pre-trained with other model "
            f"settings (pre-training vs this run): {', '.join(different)}."
        )
    return s3rec.load_encoder_weights(
        encoder, os.path.join(config.init_from, ENCODER_FILE), skip=TOWER_PREFIX
    )

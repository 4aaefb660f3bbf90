"""Sequence packing: several users' sequences in one row, the same model outputs.

Training batches are left-padded to the longest sequence, but most training
inputs of review logs are far shorter: most of what the encoder computes is
padding. Packing places the sequences of one batch one
after another in as few rows as fit (first-fit decreasing), each token keeping
its position id (counted from the right, as unpacked) and a segment id; the
encoder lets a token attend only to earlier tokens of its own segment. The
outputs at every real token are then those of the unpacked batch, the batch
holds the same users, and the loss covers the same (user, position) pairs: only
the encoder's work shrinks (by how much: docs/training.md, "Packed batches").
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from genni.components import schema

POSITIONS = "positions"  # [rows, T] position id of each token (0 at padding).
SEGMENTS = "segments"  # [rows, T] 1, 2, ... per sequence in a row; 0 at padding.
TOKEN_USERS = "token_users"  # [rows, T] the token's example in the batch.


def pack_rows(input_ids: np.ndarray, target_ids: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pack a left-padded batch [B, T] into [R, T] rows, R <= B.

    Returns:
        (input_ids, target_ids, positions, segments, token_users), each
        [R, T] int64. Padding slots are 0 everywhere (token_users 0 too: read
        it only where target_ids > 0).
    """
    width = input_ids.shape[1]
    lengths = (input_ids > schema.PADDING_ID).sum(axis=1)
    fill: list[int] = []  # Tokens placed in each row so far.
    placed = []  # (example, row, column of its first token)
    for example in np.argsort(-lengths, kind="stable"):
        length = int(lengths[example])
        if length == 0:
            continue
        row = next((r for r, used in enumerate(fill) if used + length <= width), None)
        if row is None:  # First fit: the first row with room, else a new one.
            row = len(fill)
            fill.append(0)
        placed.append((example, row, fill[row]))
        fill[row] += length
    rows = max(len(fill), 1)
    out = [np.zeros([rows, width], np.int64) for _ in range(5)]
    ids, targets, positions, segments, users = out
    segment_count = [0] * rows
    for example, row, start in placed:
        length = int(lengths[example])
        columns = slice(start, start + length)
        ids[row, columns] = input_ids[example, width - length :]
        targets[row, columns] = target_ids[example, width - length :]
        positions[row, columns] = np.arange(width - length, width)
        segment_count[row] += 1
        segments[row, columns] = segment_count[row]
        users[row, columns] = example
    return ids, targets, positions, segments, users


def _pack_inputs(input_ids: np.ndarray) -> tuple[np.ndarray, ...]:
    ids, _, positions, segments, users = pack_rows(input_ids, input_ids)
    return ids, positions, segments, users


def _replace(
    features: dict,
    fn,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    max_len: int,
) -> dict:
    """`features` with `outputs` replaced by numpy `fn` of `inputs` ([rows, T])."""
    packed = tf.numpy_function(
        fn,
        [features[name] for name in inputs],
        [tf.int64] * len(outputs),
        stateful=False,
    )
    out = dict(features)
    for name, tensor in zip(outputs, packed, strict=True):
        tensor.set_shape([None, max_len])
        out[name] = tensor
    return out


def pack_inputs(features: dict, max_len: int) -> dict:
    """tf.data map for evaluation batches: only the input ids are packed.

    An example's query is the output at its last item, the token whose
    position is the last column (`last_tokens`).
    """
    outputs = (schema.INPUT_IDS, POSITIONS, SEGMENTS, TOKEN_USERS)
    return _replace(features, _pack_inputs, (schema.INPUT_IDS,), outputs, max_len)


def last_tokens(features: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """Each example's last item: (indices [U, 2] into the rows, example [U])."""
    positions, segments = features[POSITIONS], features[SEGMENTS]
    width = tf.cast(tf.shape(positions)[1], positions.dtype)
    last = tf.logical_and(segments > 0, tf.equal(positions, width - 1))
    indices = tf.where(last)
    return indices, tf.gather_nd(features[TOKEN_USERS], indices)


def pack_features(features: dict, max_len: int) -> dict:
    """tf.data map: a parsed training batch -> the same batch, packed.

    Features other than the input and target ids (the user's items for
    `--exclude-seen`) stay per example; `TOKEN_USERS` links tokens to them.
    """
    ids = (schema.INPUT_IDS, schema.TARGET_IDS)
    outputs = (*ids, POSITIONS, SEGMENTS, TOKEN_USERS)
    return _replace(features, pack_rows, ids, outputs, max_len)

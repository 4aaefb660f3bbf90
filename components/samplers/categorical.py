"""Exact categorical draws from rows of logits, in core ops (XLA-friendly).

TensorFlow's multinomial kernel has no XLA lowering, and a cumulative sum over a
whole catalog row is slow on CPU; `categorical` inverts the CDF in two levels
(blocks of `cdf_block` items, then an item within the block). GenNi's draws
(`genni.components.samplers.genni`) use it.
"""

from __future__ import annotations

import math

import tensorflow as tf

CDF_BLOCK = 128
MIN_CDF_BLOCK = 16


def cdf_block(num_candidates: int, num_samples: int) -> int:
    """Items per CDF block of `categorical`: a power of two in [16, 128].

    A row costs about num_samples * block^2 (each draw's within-block CDF, on
    the matmul units) plus num_candidates / block for the sequential cumsum of
    block masses, a slower kernel; their sum is least near the cube root of
    173 * num_candidates / num_samples (the constant fitted by timing both
    terms on a CPU: benchmarks/results/scale_log.md).
    """
    best = (173.0 * num_candidates / max(1, num_samples)) ** (1.0 / 3.0)
    block = 2 ** round(math.log2(max(best, 1.0)))
    return int(min(CDF_BLOCK, max(MIN_CDF_BLOCK, block)))


def _block_cumsum(x: tf.Tensor) -> tf.Tensor:
    """Cumulative sum over a last axis of `block` entries (static).

    TensorFlow's CPU cumsum kernel is slow; a product with an upper-triangular
    matrix of ones is the same sum on the matmul units.
    """
    block = x.shape[-1]
    upper = tf.linalg.band_part(tf.ones([block, block], x.dtype), 0, -1)
    return tf.reshape(tf.matmul(tf.reshape(x, [-1, block]), upper), tf.shape(x))


def categorical(
    logits: tf.Tensor,
    num_samples: int,
    seed: tf.Tensor,
    size: int = CDF_BLOCK,
) -> tf.Tensor:
    """Exact draws from softmax(logits) per row, by inverting the CDF in two levels.

    A cumulative sum over a whole catalog row is slow on CPU, so the row is cut
    into blocks of `size` items (`cdf_block` picks it): a draw first picks a
    block from the cumulative block masses, then an item from that block's own
    cumulative sum. Same law as one flat inverse CDF, whatever the block; core
    ops only (XLA compiles it).

    Args:
        logits: [rows, m]; -inf entries are never drawn.
        num_samples: draws per row (with replacement).
        seed: [2] stateless seed.
        size: items per block (static).

    Returns:
        [rows, num_samples] int64 column indices.
    """
    rows, m = tf.shape(logits)[0], tf.shape(logits)[1]
    num_blocks = (m + size - 1) // size
    probs = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    probs = tf.pad(probs, [[0, 0], [0, num_blocks * size - m]])
    probs = tf.reshape(probs, [rows, num_blocks, size])  # (rows, nb, block)
    # Sequential cumsum: a zero-mass block keeps the CDF exactly flat.
    block_cdf = tf.cumsum(tf.reduce_sum(probs, axis=-1), axis=-1)  # (rows, nb)
    # u in (0, total]: the first position whose CDF reaches u has positive mass.
    u = 1.0 - tf.random.stateless_uniform([rows, num_samples], seed)
    u = tf.cast(u, probs.dtype) * block_cdf[:, -1:]  # (rows, k)
    block = tf.minimum(
        tf.searchsorted(block_cdf, u, side="left", out_type=tf.int32), num_blocks - 1
    )  # (rows, k)
    before = tf.gather(
        tf.pad(block_cdf, [[0, 0], [1, 0]]), block, batch_dims=1
    )  # (rows, k), CDF up to the chosen block
    inner_probs = tf.gather(probs, block, batch_dims=1)  # (rows, k, block)
    inner_cdf = _block_cumsum(inner_probs)
    residual = tf.minimum(u - before, inner_cdf[:, :, -1])  # (rows, k), > 0
    inner = tf.searchsorted(
        tf.reshape(inner_cdf, [-1, size]),
        tf.reshape(residual, [-1, 1]),
        side="left",
        out_type=tf.int32,
    )
    inner = tf.minimum(tf.reshape(inner, [rows, num_samples]), size - 1)
    # The matmul CDF may round a zero-mass entry (the masked target) a hair
    # above its left neighbour; never pick such an entry: take the last
    # positive-mass entry at or before the pick (the first one if none).
    positions = tf.range(size, dtype=tf.int32)
    positive = inner_probs > 0
    allowed = tf.logical_and(positive, positions <= inner[:, :, None])
    last = tf.reduce_max(tf.where(allowed, positions, -1), axis=-1)
    first = tf.argmax(tf.cast(positive, tf.int32), axis=-1, output_type=tf.int32)
    inner = tf.where(last >= 0, last, first)
    return tf.cast(block * size + inner, tf.int64)

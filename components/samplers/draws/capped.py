"""GenNi's capped draw: a uniform subset V' of the catalog, beta's share of it
and at most `max_candidates` items, drawn afresh for every batch, or for every
group of `beta_group` positions so that a batch's negatives do not all come
from the same few items. Its members are weighted up by 1 / P(in V'), so
that the draw estimates the exact law (`pick.draw`)."""

from __future__ import annotations

import math

import tensorflow as tf

# A group's V' is m ids drawn with replacement where m * this <= |V|.
REPEATS_RATIO = 32


def subset(
    table: tf.Tensor, num_items: int, m: int, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """V': ids (sorted, [m]) and embeddings ([m, d]) of a uniform draw of m
    items without replacement."""
    noise = tf.random.stateless_uniform([num_items], seed)
    _, picked = tf.math.top_k(noise, k=m, sorted=False)
    picked = tf.sort(picked)
    return tf.cast(picked, tf.int64) + 1, tf.gather(table, picked)


def drawn_with_replacement(num_candidates: int, num_items: int) -> bool:
    """Whether each group's V' is m ids drawn with replacement, its repeats
    masked, instead of a uniform m-subset.

    A subset costs O(|V|) a group (a top-k of |V| random keys); m draws cost
    O(m log m), and their repeats (a share of about m / 2|V|) leave a uniform
    subset of slightly fewer items. Used where that share is under 1/64:
    m <= |V| / 32. (What it saves at 10^6 items: benchmarks/results/scale_log.md.)
    """
    return num_candidates * REPEATS_RATIO <= num_items


def subset_with_replacement(
    table: tf.Tensor, num_items: int, m: int, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """V' of m ids drawn uniformly with replacement: sorted ids [m], their
    embeddings [m, d] and whether each repeats the one before it [m]."""
    picked = tf.sort(
        tf.random.stateless_uniform([m], seed, 0, num_items, dtype=tf.int32)
    )
    repeated = tf.concat([[False], picked[1:] == picked[:-1]], axis=0)
    return tf.cast(picked, tf.int64) + 1, tf.gather(table, picked), repeated


def log_subset(m: int, num_items: int, with_replacement: bool) -> float:
    """log P(an item is in V'): m / N, or 1 - (1 - 1/N)^m for m draws."""
    if with_replacement:
        return math.log(-math.expm1(m * math.log1p(-1.0 / num_items)))
    return math.log(m / num_items)

"""GenNi's per-row draw: each position its own V' (`beta_group` 1 on a large
catalog), m ids drawn with replacement, its repeats masked: the law of a group
of one position, without a `map_fn` step per position."""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.draws import pick
from genni.components.samplers.draws.pick import NEG_INF


def row_candidates(
    queries: tf.Tensor,
    table: tf.Tensor,
    never: tf.Tensor,
    seed: tf.Tensor,
    num_candidates: int,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Each row's own V': `num_candidates` ids drawn uniformly with
    replacement, their repeats masked, as a group's V' of one position.

    Returns ids [rows, m] (sorted in each row) and scores [rows, m], -inf at
    repeats and at the row's never-drawn ids `never` [rows, w].
    """
    rows = tf.shape(queries)[0]
    picked = tf.sort(
        tf.random.stateless_uniform(
            [rows, num_candidates], seed, 0, tf.shape(table)[0], dtype=tf.int32
        ),
        axis=1,
    )
    repeated = tf.concat(
        [tf.zeros([rows, 1], tf.bool), picked[:, 1:] == picked[:, :-1]], axis=1
    )
    ids = tf.cast(picked, tf.int64) + 1
    masked = repeated | tf.reduce_any(ids[:, :, None] == never[:, None, :], axis=-1)
    scores = pick.row_scores(queries, table, picked)
    return ids, tf.where(masked, tf.cast(NEG_INF, scores.dtype), scores)


def fallback(ids: tf.Tensor, logits: tf.Tensor, never: tf.Tensor) -> tf.Tensor:
    """The scores of `row_candidates` (`ids`, `logits` [rows, m]), where a row
    with nothing left (rare) keeps all but its target (`never[:, 0]`)."""
    empty = tf.reduce_all(tf.math.is_inf(logits), axis=-1, keepdims=True)
    # `never[:, 0]`, not `never[:, :1]`: a slice of a width unknown when
    # traced (the user's items, `exclude`) has an unknown width, which would
    # spread to the logits and break `pick.draw`'s static shapes.
    kept = tf.where(ids == never[:, 0, None], NEG_INF, 0.0)
    return tf.where(empty, tf.cast(kept, logits.dtype), logits)

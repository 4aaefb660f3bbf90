"""Pieces of GenNi's capped draw whose candidates differ from row to row.

A capped draw (`GenNiSampler`, `max_candidates` M below the catalog) scores M
uniform candidates, shared by a batch or a group of positions, or drawn for
each position (`beta_group` 1 on a large catalog: `row_candidates`), and, with
`successors`, each row's own extra items (`extra_logits`). `draw` picks the
negatives from both with weights exp(s) / P(candidate), so that the draw
estimates the exact softmax over the catalog. Core ops only (XLA).
"""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.categorical import categorical, cdf_block

NEG_INF = float("-inf")


def extra_logits(
    queries: tf.Tensor, table: tf.Tensor, extra_ids: tf.Tensor, never: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Scores [rows, E] of each row's extra candidates `extra_ids` [rows, E]
    (0: none), -inf where one is padding, one of the row's never-drawn ids
    `never` [rows, w], or a repeat of an earlier extra of its row; and that
    mask [rows, E] (True: never drawn as an extra)."""
    e = extra_ids.shape[-1]
    earlier = tf.linalg.band_part(tf.ones([e, e], tf.bool), 0, -1) & ~tf.eye(
        e, dtype=tf.bool
    )  # (E, E): j < l
    bad = (
        (extra_ids <= 0)
        | tf.reduce_any(extra_ids[:, :, None] == never[:, None, :], axis=-1)
        | tf.reduce_any(
            (extra_ids[:, :, None] == extra_ids[:, None, :]) & earlier[None], axis=1
        )
    )
    scores = row_scores(queries, table, tf.maximum(extra_ids - 1, 0))
    return tf.where(bad, tf.cast(NEG_INF, scores.dtype), scores), bad


def row_scores(queries: tf.Tensor, table: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """[n, w] scores of each query [n, d] with its own table rows `rows` [n, w]."""
    return tf.squeeze(tf.matmul(tf.gather(table, rows), queries[:, :, None]), -1)


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
    scores = row_scores(queries, table, picked)
    return ids, tf.where(masked, tf.cast(NEG_INF, scores.dtype), scores)


def draw(
    logits: tf.Tensor,
    ids: tf.Tensor,
    log_subset: float,
    num_samples: int,
    seed: tf.Tensor,
    extras: tuple[tf.Tensor, tf.Tensor] | None = None,
    return_log_q: bool = False,
):
    """k negatives a row from its uniform candidates and its extra ones.

    Args:
        logits: [rows, m] scores of the uniform candidates (-inf: never).
        ids: their ids, [m] (shared by the rows) or [rows, m].
        log_subset: log P(an item is a uniform candidate).
        num_samples: k.
        seed: [2] stateless seed.
        extras: (scores [rows, E], ids [rows, E]) of the extra candidates, a
            uniform candidate that is also one of the row's extras already
            -inf in `logits` (it counts once, as an extra); None: none.
        return_log_q: also return log Q = s_j - log Z^, Z^ the draw's
            estimate of the catalog's mass (the extras' own, plus the uniform
            candidates' over P).

    Returns:
        [rows, k] int64 ids (and [rows, k] log Q).
    """
    m = logits.shape[-1]
    if m is None:  # Traced without a static width: a tensor of the picks' type.
        m = tf.shape(logits, out_type=tf.int64)[-1]
    if extras is None:  # One law over the uniform candidates: no weights.
        block = cdf_block(logits.shape[-1] or 1, num_samples)
        picks = categorical(logits, num_samples, seed, block)
        batch_dims = 0 if ids.shape.rank == 1 else 1
        drawn = tf.gather(ids, picks, batch_dims=batch_dims)
        if not return_log_q:
            return drawn
        log_q = tf.gather(tf.nn.log_softmax(logits), picks, batch_dims=1)
        return drawn, log_q + log_subset
    # exp(s) / P(candidate): the uniform ones weighted up, the extras not.
    weighted = tf.concat([logits - log_subset, extras[0]], axis=1)
    width = weighted.shape[-1] or 1
    picks = categorical(weighted, num_samples, seed, cdf_block(width, num_samples))
    in_subset = picks < m
    uniform = tf.minimum(picks, m - 1)
    batch_dims = 0 if ids.shape.rank == 1 else 1
    drawn = tf.where(
        in_subset,
        tf.gather(ids, uniform, batch_dims=batch_dims),
        tf.gather(extras[1], tf.maximum(picks - m, 0), batch_dims=1),
    )
    if not return_log_q:
        return drawn
    log_q = tf.gather(tf.nn.log_softmax(weighted), picks, batch_dims=1)
    return drawn, log_q + tf.where(in_subset, log_subset, 0.0)

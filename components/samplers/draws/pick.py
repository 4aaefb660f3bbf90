"""The pick every GenNi draw mode ends with, and the chunking they share.

`draw` picks a row's k negatives from its candidates' scores (and, with
successor candidates, its extra ones) with weights exp(s) / P(candidate), so
that the draw estimates the exact softmax over the catalog, and gives their
log Q. The rest cuts a batch's positions into chunks of bounded memory and
masks what a row never draws.
"""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.categorical import categorical, cdf_block

NEG_INF = float("-inf")


def row_scores(queries: tf.Tensor, table: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """[n, w] scores of each query [n, d] with its own table rows `rows` [n, w]."""
    return tf.squeeze(tf.matmul(tf.gather(table, rows), queries[:, :, None]), -1)


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


def never_drawn(targets: tf.Tensor, exclude: tf.RaggedTensor | None) -> tf.Tensor:
    """[N, 1 + L] ids a row never draws, 0 where none: its target first, then
    its excluded items."""
    masked = targets[:, None]  # (N, 1)
    if exclude is not None:
        dense = tf.cast(exclude.to_tensor(default_value=0), tf.int64)
        masked = tf.concat([masked, dense], axis=1)  # (N, 1 + L)
    return masked


def in_chunks(x: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """[N, w] rows in chunks of `rows`: [C, rows, w], zero-padded at the end."""
    n = tf.shape(x)[0]
    num_chunks = (n + rows - 1) // rows
    padded = tf.pad(x, [[0, num_chunks * rows - n], [0, 0]])
    return tf.reshape(padded, [num_chunks, rows, tf.shape(x)[1]])


def over_chunks(draw_chunk, elems: tuple, k: int, dtype, return_log_q: bool):
    """`draw_chunk` over the chunks of `elems`, one chunk of scores alive at a
    time: [C, rows, k] ids (and their log Q)."""
    ids_spec = tf.TensorSpec([None, k], tf.int64)
    return tf.map_fn(
        draw_chunk,
        elems,
        fn_output_signature=(
            (ids_spec, tf.TensorSpec([None, k], dtype)) if return_log_q else ids_spec
        ),
        parallel_iterations=1,  # One chunk of logits alive at a time.
    )


def from_chunks(drawn, n: tf.Tensor, k: int):
    """`map_fn`'s per-chunk draws ([C, rows, k], or a pair of them with log Q)
    back to the first n rows: [n, k] (and [n, k])."""
    if not isinstance(drawn, (tuple, list)):
        return tf.reshape(drawn, [-1, k])[:n]
    return tuple(tf.reshape(x, [-1, k])[:n] for x in drawn)


def columns(ids: tf.Tensor, candidate_ids: tf.Tensor) -> tf.Tensor:
    """Column of each id [rows, w] among sorted `candidate_ids` [m], -1 where it
    is not a candidate (padding, id 0, never is)."""
    m = tf.shape(candidate_ids, out_type=tf.int64)[0]
    found = tf.searchsorted(
        candidate_ids[None, :], tf.reshape(ids, [1, -1]), out_type=tf.int64
    )
    found = tf.minimum(tf.reshape(found, tf.shape(ids, out_type=tf.int64)), m - 1)
    hit = tf.logical_and(tf.gather(candidate_ids, found) == ids, ids > 0)
    return tf.where(hit, found, tf.constant(-1, tf.int64))


def mask_columns(logits: tf.Tensor, columns: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """-inf at columns [rows, w] >= 0; the others keep their logits."""
    row_ids = tf.broadcast_to(
        tf.range(rows, dtype=tf.int64)[:, None], tf.shape(columns)
    )
    at = tf.stack([row_ids, tf.maximum(columns, 0)], axis=-1)  # (rows, w, 2)
    # A min-scatter: -inf where masked, +inf (no change) for the -1
    # fillers, whatever the order of duplicate indices.
    new = tf.where(columns >= 0, NEG_INF, float("inf"))
    return tf.tensor_scatter_nd_min(
        logits,
        tf.reshape(at, [-1, 2]),
        tf.cast(tf.reshape(new, [-1]), logits.dtype),
    )

"""GenNi's successor candidates: beside a capped or per-row V', each position
also scores its input item and the S items that most often followed it in
the training data (`GenNiSampler.setup` fills the table), where a trained
model's mass sits. They enter the pick unweighted, the uniform candidates
weighted up, so the draw still estimates the exact law (`pick.draw`); an
extra that is also in V' counts once, as an extra."""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.draws import pick
from genni.components.samplers.draws.pick import NEG_INF


def extra_ids(previous: tf.Tensor, successor_table: tf.Variable) -> tf.Tensor:
    """[N, 1 + S] each position's input item `previous` [N] and its successors."""
    previous = tf.cast(tf.reshape(previous, [-1, 1]), tf.int64)
    successors = tf.gather(successor_table, tf.cast(previous[:, 0], tf.int32))
    return tf.concat([previous, tf.cast(successors, tf.int64)], axis=1)


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
    scores = pick.row_scores(queries, table, tf.maximum(extra_ids - 1, 0))
    return tf.where(bad, tf.cast(NEG_INF, scores.dtype), scores), bad


def join(
    queries: tf.Tensor,
    table: tf.Tensor,
    extras: tf.Tensor,
    never: tf.Tensor,
    candidate_ids: tf.Tensor,
    logits: tf.Tensor,
    rows: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
    """V' with the rows' extras: the logits with each extra's copy in V' at
    -inf, and the extras for the pick. `candidate_ids`: a V' shared by the
    `rows` rows ([m], sorted), or each row's own ([rows, m]; `rows` unused)."""
    scores, bad = extra_logits(queries, table, extras, never)
    if candidate_ids.shape.rank == 1:  # A shared V': mask the copies' columns.
        none = tf.constant(-1, tf.int64)
        columns = tf.where(bad, none, pick.columns(extras, candidate_ids))
        return pick.mask_columns(logits, columns, rows), (scores, extras)
    valid = tf.where(bad, tf.constant(0, tf.int64), extras)
    copy = tf.reduce_any(candidate_ids[:, :, None] == valid[:, None, :], -1)
    logits = tf.where(copy, tf.cast(NEG_INF, logits.dtype), logits)
    return logits, (scores, extras)

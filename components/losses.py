"""Losses over positives and sampled negatives, and the full-softmax reference.

All take logits (h_t . e_i) and return the mean over positions.
"""

from __future__ import annotations

import tensorflow as tf

LOSSES = ("bce", "bpr", "softmax", "sampled_softmax")


def sampled_logits(
    queries: tf.Tensor, table: tf.Tensor, positives: tf.Tensor, negatives: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Scores h . e of the positives [N] and the sampled negatives [N, k].

    Args:
        queries: [N, d].
        table: [num_items + 1, d] item embeddings.
        positives: [N] item ids.
        negatives: [N, k] item ids.
    """
    positive_logits = tf.reduce_sum(queries * tf.gather(table, positives), -1)
    negative_logits = tf.einsum("nd,nkd->nk", queries, tf.gather(table, negatives))
    return positive_logits, negative_logits


def bce_loss(positive_logits: tf.Tensor, negative_logits: tf.Tensor) -> tf.Tensor:
    """NCE / binary cross-entropy with k negatives (the paper's loss).

    mean_n [ -log sigmoid(pos_n) - sum_j log(1 - sigmoid(neg_nj)) ]

    Args:
        positive_logits: [N].
        negative_logits: [N, k].
    """
    per_position = tf.nn.softplus(-positive_logits) + tf.reduce_sum(
        tf.nn.softplus(negative_logits), axis=-1
    )
    return tf.reduce_mean(per_position)


def bpr_loss(positive_logits: tf.Tensor, negative_logits: tf.Tensor) -> tf.Tensor:
    """Sequential BPR with k negatives, averaged over the negatives.

    mean_n mean_j -log sigmoid(pos_n - neg_nj)
    """
    margins = positive_logits[:, None] - negative_logits
    return tf.reduce_mean(tf.nn.softplus(-margins))


def sampled_softmax_loss(
    positive_logits: tf.Tensor,
    negative_logits: tf.Tensor,
    negative_log_q: tf.Tensor | None = None,
) -> tf.Tensor:
    """Sampled softmax: cross-entropy of the positive against itself and its k
    negatives, with the importance correction for the proposal that drew them.

    mean_n [ logsumexp(pos_n, neg_n1 - c_n1, ..., neg_nk - c_nk) - pos_n ],
    c_nj = log(k Q(j | n)), or 0 without `negative_log_q` (uncorrected).

    With the correction, (1/k) sum_j exp(neg_nj) / Q(j | n) is an unbiased
    estimate of the sum of exp(logit) over the items the proposal can draw, so
    the loss and its gradient tend to the full softmax's (over those items and
    the positive) as k grows; Q may be any law that never draws the positive,
    such as GenNi's own softmax(alpha * h . e). No gradient flows through Q.

    Args:
        positive_logits: [N].
        negative_logits: [N, k].
        negative_log_q: [N, k] log Q of each drawn negative, or None.
    """
    if negative_log_q is not None:
        k = tf.cast(tf.shape(negative_logits)[-1], negative_logits.dtype)
        correction = tf.stop_gradient(tf.cast(negative_log_q, negative_logits.dtype))
        negative_logits = negative_logits - correction - tf.math.log(k)
    logits = tf.concat([positive_logits[:, None], negative_logits], axis=-1)
    return tf.reduce_mean(tf.reduce_logsumexp(logits, axis=-1) - positive_logits)


def softmax_loss(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Full-softmax cross-entropy over the catalog (the reference ceiling).

    Args:
        logits: [N, num_items + 1]; column 0 (padding) is ignored.
        targets: [N] item ids.
    """
    mask = tf.one_hot(0, tf.shape(logits)[-1], on_value=True, off_value=False)
    logits = tf.where(mask[None, :], tf.constant(-1e9, logits.dtype), logits)
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    )

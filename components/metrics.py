"""Full-ranking evaluation: the target ranked among ALL items.

Items of the user's input history are excluded from the ranking (score -inf),
and so is padding. Ties count against the target (an item scoring exactly as
the target ranks ahead of it), so a constant model cannot look good.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

DEFAULT_KS = (5, 10, 20)


def mask_seen(scores: tf.Tensor, history: tf.RaggedTensor) -> tf.Tensor:
    """Scores with padding (column 0) and each row's history set to -inf.

    Args:
        scores: [B, num_items + 1].
        history: ragged [B, None] item ids.
    """
    history = tf.cast(history, tf.int64)
    rows = tf.cast(history.value_rowids(), tf.int64)
    indices = tf.stack([rows, history.flat_values], axis=1)
    batch = tf.shape(scores, out_type=tf.int64)[0]
    padding = tf.stack([tf.range(batch), tf.zeros([batch], tf.int64)], axis=1)
    indices = tf.concat([indices, padding], axis=0)
    neg_inf = tf.fill([tf.shape(indices)[0]], tf.constant(-np.inf, scores.dtype))
    return tf.tensor_scatter_nd_update(scores, indices, neg_inf)


def target_ranks(
    scores: tf.Tensor, targets: tf.Tensor, history: tf.RaggedTensor
) -> tf.Tensor:
    """0-based rank of each target among all unseen items.

    Args:
        scores: [B, num_items + 1] model scores.
        targets: [B] item ids.
        history: ragged [B, None] seen item ids, excluded from the ranking.

    Returns:
        [B] int64 ranks; a target that is itself in the history ranks last.
    """
    masked = mask_seen(scores, history)
    target_scores = tf.gather(masked, tf.cast(targets, tf.int64), batch_dims=1)
    ahead = masked >= target_scores[:, None]
    # The target itself is counted by `>=`; remove it, unless it was masked.
    count = tf.reduce_sum(tf.cast(ahead, tf.int64), axis=1) - 1
    masked_target = tf.math.is_inf(target_scores)
    return tf.where(masked_target, tf.shape(scores, out_type=tf.int64)[1], count)


def ranking_metrics(ranks: tf.Tensor, ks=DEFAULT_KS) -> dict[str, tf.Tensor]:
    """Per-user HR@k, NDCG@k and MRR from 0-based ranks ([B] each)."""
    ranks = tf.cast(ranks, tf.float32)
    gain = 1.0 / (tf.math.log(ranks + 2.0) / tf.math.log(2.0))
    metrics = {}
    for k in ks:
        hit = tf.cast(ranks < k, tf.float32)
        metrics[f"HR@{k}"] = hit
        metrics[f"NDCG@{k}"] = hit * gain
    metrics["MRR"] = 1.0 / (ranks + 1.0)
    return metrics


class RankingAccumulator:
    """Sums per-user metrics over batches; `result()` gives means in percent."""

    def __init__(self, ks=DEFAULT_KS):
        self.ks = tuple(ks)
        self.sums: dict[str, float] = {}
        self.count = 0

    def update(self, ranks: tf.Tensor | np.ndarray) -> None:
        for name, values in ranking_metrics(ranks, self.ks).items():
            self.sums[name] = self.sums.get(name, 0.0) + float(
                np.sum(np.asarray(values, dtype=np.float64))
            )
        self.count += int(np.shape(ranks)[0])

    def result(self) -> dict[str, float]:
        if not self.count:
            raise ValueError("No user was evaluated.")
        return {name: 100.0 * s / self.count for name, s in self.sums.items()}


def ndcg_gap_bounds(
    hr_low: float, hr_high: float, low: int = 5, high: int = 10
) -> tuple[float, float]:
    """Bounds on NDCG@high - NDCG@low that HR@low and HR@high imply.

    With one target per user, the users counted by HR@high but not HR@low
    rank between low + 1 and high (1-based), each adding between
    1 / log2(high + 1) and 1 / log2(low + 2) to NDCG@high. Means over users
    (and seeds) keep the bounds, so any table of HR@k / NDCG@k from one
    set of rankings satisfies them; rounded figures need a slack.
    """
    if not 0 < low < high:
        raise ValueError(f"Need 0 < low < high. Got {low}, {high}.")
    gap = hr_high - hr_low
    return gap / np.log2(high + 1.0), gap / np.log2(low + 2.0)


def metrics_consistent(
    metrics: dict[str, float], low: int = 5, high: int = 10, decimals: int = 2
) -> tuple[bool, str]:
    """Whether HR@low, HR@high, NDCG@low and NDCG@high (all in the same unit,
    e.g. %) can come from one set of rankings (`ndcg_gap_bounds`), given
    that each was rounded to `decimals`. Returns the verdict and the numbers."""
    hr_gap = metrics[f"HR@{high}"] - metrics[f"HR@{low}"]
    ndcg_gap = metrics[f"NDCG@{high}"] - metrics[f"NDCG@{low}"]
    slack = 10.0**-decimals  # Two numbers, each off by up to half the last digit.
    least, most = ndcg_gap_bounds(0.0, 1.0, low, high)  # Per unit of HR gap.
    ok = bool(
        max(hr_gap - slack, 0.0) * least <= ndcg_gap + slack
        and ndcg_gap - slack <= (hr_gap + slack) * most
    )
    return ok, (
        f"NDCG@{high} - NDCG@{low} = {ndcg_gap:.2f}; HR@{high} - HR@{low} = "
        f"{hr_gap:.2f} allows {hr_gap * least:.2f} to {hr_gap * most:.2f}"
    )

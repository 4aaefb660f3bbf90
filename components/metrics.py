"""Full-ranking evaluation: the target ranked among every candidate item.

Which items are candidates is the rule `candidates`:

- "new" (the paper's protocol): the items of the user's input history are not
  ranked (score -inf). A target that repeats a history item is then a miss.
- "all": every item is ranked, for domains where people consume the same item
  again (groceries, music). Only padding (item 0) is left out.

Never "exclude the history but keep the target": that would tell the ranking
which history item is the answer. Ties count against the target (an item
scoring exactly as the target ranks ahead of it), so a constant model cannot
look good, and so do NaN scores of other items. A target whose own score is
NaN or +-inf ranks last: a non-finite score never wins.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

DEFAULT_KS = (5, 10, 20)
CANDIDATES = ("new", "all")


def check_candidates(candidates: str) -> str:
    if candidates not in CANDIDATES:
        raise ValueError(
            f"`candidates` must be one of {CANDIDATES}. Got {candidates!r}."
        )
    return candidates


def left_out(history: tf.Tensor | tf.RaggedTensor, candidates: str) -> tf.RaggedTensor:
    """The items a ranking leaves out of each row: THE rule of `candidates`.

    Padding (item 0) always; under "new", every item of the row's history too.
    Training evaluation, the export's top-K, the ANN path and the reference
    ranking all ask this function, so the rule is written once.

    Args:
        history: [B, L] item ids, ragged or dense (0 in a dense row, padding
            or an unknown item, is item 0: left out anyway).
        candidates: "new" or "all".

    Returns:
        ragged [B, None] int64 ids (an id may repeat).
    """
    check_candidates(candidates)
    if not isinstance(history, tf.RaggedTensor):
        history = tf.RaggedTensor.from_tensor(history)
    history = tf.cast(history, tf.int64).with_row_splits_dtype(tf.int64)
    padding = tf.RaggedTensor.from_tensor(
        tf.zeros(tf.stack([history.nrows(), 1]), tf.int64), row_splits_dtype=tf.int64
    )
    if candidates == "all":
        return padding
    return tf.concat([padding, history], axis=1)


def mask_left_out(
    scores: tf.Tensor, history: tf.Tensor | tf.RaggedTensor, candidates: str
) -> tf.Tensor:
    """`scores` [B, num_items + 1] with the items `left_out` of each row at -inf."""
    excluded = left_out(history, candidates)
    indices = tf.stack(
        [tf.cast(excluded.value_rowids(), tf.int64), excluded.flat_values], axis=1
    )
    neg_inf = tf.fill([tf.shape(indices)[0]], tf.constant(-np.inf, scores.dtype))
    return tf.tensor_scatter_nd_update(scores, indices, neg_inf)


def is_left_out(
    targets: tf.Tensor, history: tf.Tensor | tf.RaggedTensor, candidates: str
) -> tf.Tensor:
    """[B] bool: whether each target is one of the items `left_out` of its row
    (padding, or under "new" a history item): such a target ranks last."""
    dense = left_out(history, candidates).to_tensor(default_value=-1)  # (B, L)
    return tf.reduce_any(dense == tf.cast(targets, tf.int64)[:, None], axis=1)


def in_history(targets: tf.Tensor, history: tf.RaggedTensor) -> tf.Tensor:
    """[B] bool: whether each target is one of its row's history items (a
    repeat, counted whatever the ranking rule)."""
    dense = tf.cast(history, tf.int64).to_tensor(default_value=-1)  # (B, L)
    return tf.reduce_any(dense == tf.cast(targets, tf.int64)[:, None], axis=1)


def target_ranks(
    scores: tf.Tensor,
    targets: tf.Tensor,
    history: tf.RaggedTensor,
    candidates: str = "new",
) -> tf.Tensor:
    """0-based rank of each target among the candidate items.

    Args:
        scores: [B, num_items + 1] model scores.
        targets: [B] item ids.
        history: ragged [B, None] the user's input items.
        candidates: "new" leaves the history out of the ranking (a target in
            it ranks last); "all" ranks every item.

    Returns:
        [B] int64 ranks. Last (num_items + 1) for a target left out of the
        ranking or with a non-finite score.
    """
    check_candidates(candidates)
    targets = tf.cast(targets, tf.int64)
    ranked = mask_left_out(scores, history, candidates)
    target_scores = tf.gather(scores, targets, batch_dims=1)
    ahead = tf.logical_or(ranked >= target_scores[:, None], tf.math.is_nan(ranked))
    # The target itself is counted by `>=` (its score is finite when used).
    count = tf.reduce_sum(tf.cast(ahead, tf.int64), axis=1) - 1
    last_rank = tf.shape(scores, out_type=tf.int64)[1]
    return _or_last(count, targets, target_scores, history, candidates, last_rank)


def _or_last(count, targets, target_scores, history, candidates, last_rank):
    """`count` (items ahead), but `last_rank` for a target left out of the
    ranking (`is_left_out`) or with a non-finite score: the rule both
    rankings share."""
    last = tf.logical_or(
        is_left_out(targets, history, candidates),
        tf.logical_not(tf.math.is_finite(target_scores)),
    )
    return tf.where(last, last_rank, count)


def chunked_target_ranks(
    queries: tf.Tensor,
    items: tf.Tensor,
    targets: tf.Tensor,
    history: tf.RaggedTensor,
    candidates: str = "new",
    chunk_size: int = 8192,
) -> tf.Tensor:
    """`target_ranks` of the scores `queries @ items^T`, items a chunk at a time.

    Never holds the [B, num_items + 1] scores: each chunk of `chunk_size` items
    is scored, compared with the target's score and counted, so memory is
    B x chunk_size at any catalog size (full ranking over 10^6 items with
    bounded memory, the users chunked by the caller's batches).

    The same rule as `target_ranks`: the padding row is never ranked; under
    "new" the history is not; ties and NaN scores count against the target; a
    target left out or with a non-finite score ranks last (num_items + 1). The
    target's score is its own dot product, and it never counts against itself.
    Scores are summed in another order here than the target's, so an item
    within float rounding of the target's score (`rounding_bound`) is a tie,
    and counts ahead: a collapsed model (equal item rows) ranks every target
    last, whatever the CPU's summation order.

    Args:
        queries: [B, d] query embeddings.
        items: [num_items + 1, d] the item table (row 0: padding).
        targets: [B] item ids.
        history: ragged [B, None] the user's input items.
        candidates: "new" or "all", as in `target_ranks`.
        chunk_size: items scored at once.
    """
    check_candidates(candidates)
    if chunk_size < 1:
        raise ValueError(f"`chunk_size` must be at least 1. Got {chunk_size}.")
    queries = tf.convert_to_tensor(queries)
    # Read a variable once: sliced in the loop, it would be read (and copied,
    # the whole table) at every chunk.
    items = tf.convert_to_tensor(items)
    targets = tf.cast(targets, tf.int64)
    history = tf.cast(history, tf.int64)
    batch = tf.shape(queries, out_type=tf.int64)[0]
    num_rows = tf.shape(items, out_type=tf.int64)[0]
    target_scores = tf.reduce_sum(queries * tf.gather(items, targets), axis=1)
    # The matmul below and this sum add the products in different orders:
    # an item within rounding of the target's score is a tie (see above).
    bound = rounding_bound(queries)  # [B]
    norms = _finite_or_zero(tf.norm(items, axis=1))  # [num_rows]
    slack = bound * tf.gather(norms, targets)
    # The (user, item) pairs that are not ranked against the target, once
    # each: the target itself and the items `left_out` of the ranking.
    excluded = left_out(history, candidates)
    rows = tf.concat([tf.range(batch), tf.cast(excluded.value_rowids(), tf.int64)], 0)
    excluded = tf.concat([targets, excluded.flat_values], 0)
    pairs, _ = tf.unique(rows * num_rows + excluded)
    pairs = tf.boolean_mask(pairs, pairs % num_rows > 0)  # Padding: never ranked.
    rows, excluded = pairs // num_rows, pairs % num_rows

    def count_chunk(start, count):
        # Items of the chunk at or above the target's score (or NaN) are
        # those not below it; the excluded ones among them are taken back.
        stop = tf.minimum(start + chunk_size, num_rows)
        scores = tf.matmul(queries, items[start:stop], transpose_b=True)  # [B, C]
        ties = slack[:, None] + bound[:, None] * norms[None, start:stop]
        below = scores < target_scores[:, None] - ties
        count += (stop - start) - tf.cast(
            tf.reduce_sum(tf.cast(below, tf.int32), axis=1), tf.int64
        )
        inside = tf.logical_and(excluded >= start, excluded < stop)
        where = tf.stack(
            [tf.boolean_mask(rows, inside), tf.boolean_mask(excluded, inside) - start],
            axis=1,
        )
        ahead = tf.logical_not(tf.gather_nd(below, where))
        count -= tf.math.unsorted_segment_sum(
            tf.cast(ahead, tf.int64), where[:, 0], batch
        )
        return stop, count

    _, count = tf.while_loop(
        lambda start, _: start < num_rows,
        count_chunk,
        (tf.constant(1, tf.int64), tf.zeros([batch], tf.int64)),
    )
    return _or_last(count, targets, target_scores, history, candidates, num_rows)


def rounding_bound(queries: tf.Tensor) -> tf.Tensor:
    """[B] gamma_d |q| for each query q [B, d]: a float sum of the d products
    of q . e, in any order, is within gamma_d |q| |e| of the exact value
    (gamma_d = d u / (1 - d u), u the unit roundoff; 2.4e-6 at d = 64 in
    float32), so two scores that are equal in exact arithmetic, q . e and
    q . e', differ by at most gamma_d |q| (|e| + |e'|), however each was
    summed. 0 for a non-finite query (its scores rank the target last)."""
    d = queries.shape[-1]
    u = float(np.finfo(queries.dtype.as_numpy_dtype).eps) / 2
    if d is None:
        d = tf.cast(tf.shape(queries)[-1], queries.dtype)
    gamma = d * u / (1 - d * u)
    return _finite_or_zero(gamma * tf.norm(queries, axis=1))


def _finite_or_zero(x: tf.Tensor) -> tf.Tensor:
    return tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))


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

"""How many candidates a GenNi draw scores within a budget of scores per step.

Pure arithmetic, without TensorFlow: the run's settings resolve it
(`TrainConfig.draw_candidates`), and so do the runs' keys
(`genni.pipeline.training.keys`).
"""

from __future__ import annotations

import math

# GenNi's two-level draw (`clusters`): the candidates a position scores and
# resamples its negatives from, and training steps between refreshes of the
# item clusters.
DEFAULT_CLUSTER_SAMPLES = 64
DEFAULT_CLUSTER_REFRESH = 100
# Most scores (logits) a GenNi draw holds at once: 2^24 floats, 64 MiB.
DEFAULT_MAX_LOGITS = 1 << 24


def budget_candidates(
    budget: int,
    positions: float,
    num_items: int,
    cap: int | None = None,
    minimum: int = 2,
) -> int | None:
    """M, the items one draw scores, within a budget of scores per step.

    A step's draws compute `positions` x M scores (a matmul of the queries
    with the candidates, then an exp and a CDF pass over each score), so their
    cost grows with both the catalog (through M) and the histories (through
    the positions a batch holds). This returns the largest power of two M with
    positions x M <= `budget`, at most `cap` and at least `minimum`; None
    when the result reaches the catalog (every item scored, beta 1).

    >>> budget_candidates(1 << 27, 256 * 43.4, 1_000_000, cap=16_384)
    8192
    >>> budget_candidates(1 << 27, 256 * 5.9, 12_101, cap=16_384) is None
    True
    """
    if budget < 1:
        raise ValueError(f"`budget` must be positive. Got {budget}.")
    m = max(1.0, budget / max(positions, 1.0))
    m = max(int(minimum), 2 ** math.floor(math.log2(m)))
    if cap is not None:
        m = min(m, cap)
    return None if m >= num_items else m


def scored_candidates(
    num_items: int, beta: float, max_candidates: int | None, num_negatives: int
) -> int:
    """|V'|, the items a GenNi draw scores (`GenNiSampler.num_candidates`):
    beta's share of the catalog, at most `max_candidates`, at least k + 1 (so
    that a non-target exists), at most the catalog."""
    m = math.ceil(beta * num_items)
    if max_candidates is not None:
        m = min(m, max_candidates)
    return min(num_items, max(m, num_negatives + 1))


def positions_per_step(events: int, users: int, max_len: int, batch_size: int) -> float:
    """Mean target positions in a training batch of `batch_size` users: a user
    of n events trains on n - 3 of them (the last two are held out for
    validation and test), at most `max_len`, n taken as events / users."""
    per_user = min(max(events / max(1, users) - 3.0, 1.0), float(max_len))
    return batch_size * per_user

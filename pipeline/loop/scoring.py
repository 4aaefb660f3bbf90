"""A replay step's scores: the served SavedModel's and the popularity
ranking's NDCG@10 and HR@10 (%) on the next period's cases, and the targets
the served version cannot rank."""

from __future__ import annotations

import collections


def _padded(histories: list[list[str]]):
    import numpy as np

    width = max(len(h) for h in histories)
    out = np.full((len(histories), width), "", dtype=object)
    for row, history in enumerate(histories):
        out[row, : len(history)] = history
    return out


def score_version(
    path: str, histories, targets, batch: int = 256, served: set | None = None
) -> dict:
    """NDCG@10 and HR@10 (%) of the SavedModel at `path` on the cases, and
    under "new_targets" the count and the same metrics of the cases whose
    target has no trained ID row in it (`trained_items`; metrics only where
    there are such cases); `served`: a set that collects every item of the
    top-10s it answers."""
    import numpy as np
    import tensorflow as tf

    from genni.components.metrics import RankingAccumulator
    from genni.pipeline.serving import export, guard

    model = tf.saved_model.load(path)
    top_k = model.signatures[export.SIGNATURE_TOP_K]
    trained = trained_items(model)
    accumulator, new = RankingAccumulator(), RankingAccumulator()
    for start in range(0, len(targets), batch):
        rows = slice(start, start + batch)
        ranks, ids = guard.served_rankings(
            top_k, _padded(histories[rows]), targets[rows]
        )
        accumulator.update(ranks)
        untrained = np.array([t not in trained for t in targets[rows]], dtype=bool)
        if untrained.any():
            new.update(ranks[untrained])
        if served is not None:  # The top-10s, from the same answer.
            served.update(i.decode() for i in ids[:, :10].ravel() if i)
    new_targets = {"cases": new.count}
    if new.count:
        new_targets |= _two(new.result())
    return _two(accumulator.result()) | {"new_targets": new_targets}


def trained_items(model) -> set[str]:
    """The items a loaded export has trained ID rows for: those with
    training events (its popularity fallback, log(1 + events), above 0)."""
    strings = model.item_strings.numpy()
    events = model.popularity.numpy()
    return {s.decode() for s, e in zip(strings, events, strict=True) if e > 0}


def score_popular(
    events: dict, cut: float, histories, targets, candidates: str
) -> dict:
    """The most-popular-items baseline: items by their events up to `cut`,
    each ranking leaving out what the run's rule leaves out (`candidates`,
    `metrics.left_out`: under "new" a user's own items), as the model's does."""
    import numpy as np
    import tensorflow as tf

    from genni.components import metrics

    counts = collections.Counter(
        item for timed in events.values() for t, item in timed if t <= cut
    )
    order = [item for item, _ in counts.most_common()]
    index = {item: i for i, item in enumerate(order, start=1)}  # 0: unknown.
    rows = [[index.get(i, 0) for i in history] for history in histories]
    history = tf.ragged.constant(rows, dtype=tf.int64, ragged_rank=1)
    excluded = metrics.left_out(history, candidates).to_list()
    accumulator = metrics.RankingAccumulator()
    for left_out, target in zip(excluded, targets, strict=True):
        skip = set(left_out)
        ranked = [i for i in order[: 20 + len(skip)] if index[i] not in skip]
        rank = ranked.index(target) if target in ranked else len(order)
        accumulator.update(np.array([rank]))
    return _two(accumulator.result())


def _two(metrics: dict) -> dict:
    return {k: round(metrics[k], 4) for k in ("NDCG@10", "HR@10")}


def unservable(path: str | None, events: dict, cut: float, targets) -> dict:
    """The shares of `targets` the SavedModel at `path` cannot rank (not in
    its vocabulary): `new`, items never met up to `cut`, and `met`, items
    met before it that the served version does not know (removed by the
    k-core, or newer than the served version)."""
    import tensorflow as tf

    if path is None or not targets:
        return {}
    known = {i.decode() for i in tf.saved_model.load(path).item_strings.numpy()}
    met = {item for timed in events.values() for t, item in timed if t <= cut}
    out = [t for t in targets if t not in known]
    return {
        "new": round(sum(t not in met for t in out) / len(targets), 4),
        "met": round(sum(t in met for t in out) / len(targets), 4),
    }

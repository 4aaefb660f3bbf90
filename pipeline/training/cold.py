"""The content baseline for items never trained on: each test case's target
ranked among those items by how often their attributes occur in the user's
history.

The protocol of `../shared/tools/cold_baseline.py` (on Beauty, 10% of the
items held out with seed 0: 8.29% HR@10 among the held-out items), on a
dataset of `genni preprocess --hold-out-items` with `--item-attributes`:

- the cold items: those held out (`Dataset.cold_items`);
- the cases: the test examples whose target is one, their history as the
  example holds it (every earlier item that is not held out);
- an item's score: the history's attribute occurrences it shares (the sum over
  its attributes of how often each occurs among the history items'
  attributes), over the history's attribute total, plus 1e-6 x its attribute
  popularity (its attributes' summed counts over every user's items but the
  last two, held-out items left out);
- rank: among the cold items; ties count against the target.

The same scores also rank each target over every item, trained or not
(`every_item`): the reference for a model's cold cases over the whole catalog,
where a cold item competes with items whose ID rows know more than their
attributes say (the shared tool ranks among the cold items only).

`genni train` reports it beside the model's own cold cases
(`metrics.json`: `test_by_target.content_baseline`).
"""

from __future__ import annotations

import os

import numpy as np

from genni.components import schema
from genni.components.metrics import RankingAccumulator

TIE_BREAK = 1e-6  # The weight of attribute popularity: it only breaks ties.


def content_baseline(
    dataset, split: str = schema.TEST, batch: int = 256
) -> dict | None:
    """HR@k, NDCG@k and MRR (%) of the content baseline among the cold items
    on `split`'s cases whose target is one, with their count under "cases"
    and the same metrics over every item under "every_item"; None without
    attributes or cold targets."""
    attributes = dataset.item_attributes()
    counts = dataset.item_counts()
    cold = dataset.cold_items()
    if attributes is None or not cold.size:
        return None
    index: dict[str, int] = {}
    item_attributes: list[list[int]] = [[] for _ in range(dataset.num_items + 1)]
    for item in range(1, dataset.num_items + 1):
        item_attributes[item] = [
            index.setdefault(str(a), len(index)) for a in attributes.get(str(item), [])
        ]
    # [items + 1, attributes]: how often item i holds attribute a.
    holds = np.zeros((dataset.num_items + 1, max(1, len(index))), dtype=np.float64)
    for item, row in enumerate(item_attributes):
        np.add.at(holds[item], row, 1.0)
    popularity = _event_counts(dataset, cold, counts) @ holds  # [attributes]
    tie_break = TIE_BREAK * (holds @ popularity)  # [items + 1]
    tie_break[0] = -np.inf  # Padding: never ranked.
    accumulator, every_item = RankingAccumulator(), RankingAccumulator()
    for features in dataset.batches(split, batch):
        targets = features[schema.TARGET].numpy()
        rows = np.flatnonzero(np.isin(targets, cold))
        if not rows.size:
            continue
        histories = features[schema.HISTORY].to_list()
        seen = np.stack([holds[histories[r]].sum(axis=0) for r in rows])
        total = np.maximum(seen.sum(axis=1, keepdims=True), 1.0)
        scores = (seen / total) @ holds.T + tie_break  # [B, items + 1]
        target_scores = scores[np.arange(len(rows)), targets[rows]][:, None]
        above = scores >= target_scores
        accumulator.update(above[:, cold].sum(axis=1) - 1)  # Not itself.
        every_item.update(above.sum(axis=1) - 1)
    if not accumulator.count:
        return None
    return accumulator.result() | {
        "cases": accumulator.count,
        "every_item": every_item.result(),
    }


def by_target_with_baseline(by_target: dict, dataset, split: str) -> dict:
    """`Evaluator.by_target` with the content baseline of the same cases
    under "content_baseline" (where the dataset has attributes)."""
    baseline = content_baseline(dataset, split)
    if baseline is None:
        return dict(by_target)
    return dict(by_target) | {"content_baseline": baseline}


def _event_counts(dataset, cold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each item's training events, as the protocol counts them: with items
    held out, every user's items but the last two, held-out ones left out
    (`sequences.tsv`); else the training sequences' (`counts`)."""
    if not dataset.stats().get("hold_out"):
        return counts.astype(np.float64)
    ids = {item: n for n, item in enumerate(dataset.ids(schema.ITEMS_FILE)) if n}
    held = set(cold.tolist())
    out = np.zeros(dataset.num_items + 1, dtype=np.float64)
    with open(os.path.join(dataset.path, schema.SEQUENCES_FILE), encoding="utf-8") as f:
        for line in f:
            items = [ids[i] for i in line.rstrip("\n").split("\t")[1].split()]
            for item in items[:-2]:
                if item not in held:
                    out[item] += 1.0
    return out

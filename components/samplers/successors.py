"""Each item's most frequent successors in the training data (numpy only).

GenNi's capped draw (`GenNiSampler(successors=S)`) scores, beside its uniform
candidates, the S items that most often came right after a position's input
item. A trained sequential model puts most of a query's mass on such items
(the other continuations of the same item), which a uniform subset of a large
catalog rarely holds. The table costs S ids per item (64 MiB at 10^6 items and
S = 16, as int32) and one pass over the training sequences to build.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def successor_table(
    sequences: Iterable[tuple[np.ndarray, np.ndarray]], num_items: int, size: int
) -> np.ndarray:
    """[num_items + 1, size] int32: row i holds the items that followed item i
    most often, most frequent first (ties: the smaller id), 0 past the last.

    Args:
        sequences: (values, row_splits) pairs, each a batch of sequences of
            item ids in 1..num_items as a ragged array (the sequences of a
            batch are values[row_splits[j]:row_splits[j + 1]]).
        num_items: catalog size.
        size: S, successors kept per item.
    """
    if size < 1:
        raise ValueError(f"`size` must be positive. Got {size}.")
    width = np.int64(num_items + 1)
    pairs = []
    for values, splits in sequences:
        values = np.asarray(values, dtype=np.int64)
        if len(values) < 2:
            continue
        # A pair (a, b) of consecutive items of one sequence: b's position is
        # not the first of its sequence.
        starts = np.zeros(len(values), dtype=bool)
        starts[np.asarray(splits[:-1], dtype=np.int64)[np.diff(splits) > 0]] = True
        follows = ~starts[1:]
        pairs.append(values[:-1][follows] * width + values[1:][follows])
    table = np.zeros((num_items + 1, size), dtype=np.int32)
    if not pairs:
        return table
    keys, counts = np.unique(np.concatenate(pairs), return_counts=True)
    first, then = keys // width, keys % width
    order = np.lexsort((then, -counts, first))  # By item, most frequent first.
    first, then = first[order], then[order]
    rank = np.arange(len(first)) - np.searchsorted(first, first, side="left")
    kept = rank < size
    table[first[kept], rank[kept]] = then[kept]
    return table

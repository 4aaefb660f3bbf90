"""The iterative k-core of `genni preprocess` as Beam transforms.

Users and items with fewer than k events go, round after round, until nothing
changes (`sequences.kcore_round`). The rounds are unrolled in the graph, each
reading the item counts before filtering and what every earlier round removed
as side inputs, so no round needs a global step of its own.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Mapping

import apache_beam as beam
from apache_beam import pvalue

from genni.pipeline.preprocess import sequences

STATS = "stats"
REMOVED = "removed"
UserBatch = str  # sequences.pack_users([(raw user id, [raw item, ...]), ...])


class CounterSumFn(beam.CombineFn):
    """Adds up `collections.Counter`s (or plain dicts of counts)."""

    def create_accumulator(self) -> collections.Counter:
        return collections.Counter()

    def add_input(
        self, acc: collections.Counter, counts: Mapping
    ) -> collections.Counter:
        acc.update(counts)
        return acc

    def merge_accumulators(
        self, accumulators: Iterable[collections.Counter]
    ) -> collections.Counter:
        merged: collections.Counter = collections.Counter()
        for acc in accumulators:
            merged.update(acc)
        return merged

    def extract_output(self, acc: collections.Counter) -> dict:
        return dict(acc)


def _count_items(batch: UserBatch) -> Iterator[dict]:
    yield collections.Counter(
        item for _, items in sequences.unpack_users(batch) for item in items
    )


def pack_counts(counts: Mapping[str, int]) -> str:
    """Item counts as one `item<TAB>count` text block.

    Side inputs are cached by the runner, which measures the deep size of every
    cached object; one string is measured in O(1), a large dict is walked.
    """
    return "\n".join(f"{item}\t{n}" for item, n in counts.items())


def unpack_counts(block: str) -> dict[str, int]:
    counts = {}
    for line in block.split("\n"):
        if line:
            item, _, n = line.partition("\t")
            counts[item] = int(n)
    return counts


class KCoreRoundFn(beam.DoFn):
    """Round `r` of k-core filtering over a batch of users.

    Side inputs are the item counts before filtering and the `(round, removed
    item counts)` of every earlier round, so the current counts are derived
    without a global step per round. A round after one that removed nothing has
    nothing to do and passes batches through untouched.
    """

    def __init__(self, min_count: int, round_index: int):
        self._min_count = min_count
        self._round = round_index

    def setup(self) -> None:
        self._sources: tuple = ()
        self._counts: dict[str, int] = {}

    def _current_counts(self, initial: str, removed: list) -> dict[str, int]:
        sources = (initial, tuple(removed))
        if sources != self._sources:  # Once per worker, not per batch.
            counts = unpack_counts(initial)
            for _, block in removed:
                for item, n in unpack_counts(block).items():
                    counts[item] -= n
            self._sources, self._counts = sources, counts
        return self._counts

    def process(self, batch: UserBatch, initial: str, removed: list) -> Iterator:
        if self._round > 2 and not any(r == self._round - 1 for r, _ in removed):
            yield batch  # The previous round changed nothing: converged.
            return
        item_counts = self._current_counts(initial, removed)
        kept, dropped = sequences.kcore_pass(
            sequences.unpack_users(batch), item_counts, self._min_count
        )
        if dropped:
            yield pvalue.TaggedOutput(REMOVED, (self._round, pack_counts(dropped)))
        if kept:
            yield sequences.pack_users(kept)


def _round_stat(removed: tuple[int, str]) -> tuple[str, int]:
    round_index, block = removed
    return f"kcore_removed_round_{round_index}", sum(unpack_counts(block).values())


class KCoreFilter(beam.PTransform):
    """Iterative k-core of users and items, unrolled to `max_rounds` + 1 rounds.

    The item counts before filtering are one text block (the size of the
    catalog) read as a side input, together with what every earlier round
    removed. Returns `batches` (the kept users), `stats` (item count before,
    events removed per round) and `initial` (the item counts before filtering).
    """

    def __init__(self, min_count: int, max_rounds: int):
        super().__init__()
        self._min_count = min_count
        self._max_rounds = max_rounds

    def expand(self, batches: beam.PCollection) -> dict[str, beam.PCollection]:
        initial = (
            batches
            | "CountItems" >> beam.FlatMap(_count_items)
            | "SumCounts" >> beam.CombineGlobally(CounterSumFn())
            | "PackCounts" >> beam.Map(pack_counts)
        )
        removed = initial | "NothingRemoved" >> beam.FlatMap(lambda _: [])
        for r in range(1, self._max_rounds + 2):
            result = batches | f"Round{r}" >> beam.ParDo(
                KCoreRoundFn(self._min_count, r),
                beam.pvalue.AsSingleton(initial),
                beam.pvalue.AsList(removed),
            ).with_outputs(REMOVED, main="kept")
            removed = (removed, result[REMOVED]) | f"Removed{r}" >> beam.Flatten()
            batches = result.kept
        stats = removed | "RoundStats" >> beam.Map(_round_stat)
        initial_stats = initial | "ItemsBefore" >> beam.Map(
            lambda block: ("kcore_items_before", len(unpack_counts(block)))
        )
        return {
            "batches": batches,
            STATS: (stats, initial_stats) | "FlattenStats" >> beam.Flatten(),
            # The item counts before filtering (`pack_counts`): the items met.
            "initial": initial,
        }

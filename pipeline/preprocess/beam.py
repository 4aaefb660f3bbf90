"""`genni preprocess`: review logs to padded-sequence TFRecords, with Apache Beam.

Steps, each a labelled composite transform:

1. `ReadLogs`: the lines of every input file (plain or compressed), in chunks,
   with the file name, reshuffled so that parsing spreads over workers.
2. `ParseReviews`: `ParseReviewFn` parses each line; events with rating <=
   --min-rating are dropped, malformed lines go to the dead-letter output with
   their reason.
3. `BuildUserSequences`: group by user, drop exact duplicate events, order by
   (timestamp, raw item id).
4. `KCoreFilter`: simultaneous rounds of user and item filtering, unrolled up to
   --max-kcore-rounds; a round that removes nothing makes the rest no-ops.
5. `AssignIds`: users numbered in raw-id order, items in order of first
   appearance over those users (the numbering of the S3-Rec benchmark files).
6. `EncodeExamples`: leave-one-out split and `tf.train.Example`s per split.
7. Writers for the TFRecords, vocabularies, sequences, dead letters and stats.

Users travel in batches after grouping (`beam.BatchElements`, each packed into
one `user<TAB>items` text block), so the per-user work is plain Python, the
runner's per-element cost is paid per batch, and the k-core rounds move compact
strings between stages.
The pipeline writes into a staging directory; `run` moves it into place only when
the run has succeeded and its statistics are sane.

DirectRunner is the default; any runner is chosen with the standard pipeline
options, e.g. `--runner=DataflowRunner --project=... --region=...
--temp_location=gs://... --setup_file=./setup.py` or `--runner=FlinkRunner
--flink_master=host:8081`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Iterator, Mapping

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindows

from genni.components import schema
from genni.pipeline.preprocess import formats, inmemory, outputs, sequences
from genni.pipeline.preprocess.config import PreprocessConfig

_LOG = logging.getLogger(__name__)

EVENTS = "events"
DEAD_LETTER = "dead_letter"
STATS = "stats"
REMOVED = "removed"

CHUNK_LINES = 2000
READ_BLOCK_BYTES = 1 << 22
MIN_BATCH = 64
MAX_BATCH = 2048

UserBatch = str  # sequences.pack_users([(raw user id, [raw item, ...]), ...])


def _stat(key: str, value: int) -> pvalue.TaggedOutput:
    """A statistic emitted from `finish_bundle` (which needs a windowed value)."""
    return pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value((key, value)))


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


class MinPerKeyFn(beam.CombineFn):
    """Merges dicts keeping the smallest value of every key."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, acc: dict, values: Mapping) -> dict:
        for key, value in values.items():
            if key not in acc or value < acc[key]:
                acc[key] = value
        return acc

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for acc in accumulators:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc: dict) -> dict:
        return acc


class ReadLineChunksFn(beam.DoFn):
    """A matched file -> (file name, [line, ...]) chunks of `chunk_lines` lines.

    Reading whole blocks and splitting them in Python is several times cheaper
    than one runner element per line; a compressed file could not be split
    between workers anyway, and the chunks are spread by the reshuffle after.
    """

    def __init__(self, chunk_lines: int = CHUNK_LINES):
        self._chunk_lines = chunk_lines

    def process(self, readable: fileio.ReadableFile) -> Iterator[tuple[str, list]]:
        path = readable.metadata.path
        tail = b""
        chunk: list[str] = []
        with readable.open(compression_type=CompressionTypes.AUTO) as f:
            while block := f.read(READ_BLOCK_BYTES):
                lines = (tail + block).split(b"\n")
                tail = lines.pop()
                chunk.extend(line.decode("utf-8").rstrip("\r") for line in lines)
                while len(chunk) >= self._chunk_lines:
                    yield path, chunk[: self._chunk_lines]
                    chunk = chunk[self._chunk_lines :]
        if tail:
            chunk.append(tail.decode("utf-8").rstrip("\r"))
        if chunk:
            yield path, chunk


class ReadLogs(beam.PTransform):
    """Every line of every file matching `pattern`, as (file, [lines]) chunks."""

    def __init__(self, pattern: str, chunk_lines: int = CHUNK_LINES):
        super().__init__()
        self._pattern = pattern
        self._chunk_lines = chunk_lines

    def expand(self, p: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            p
            | "Match" >> fileio.MatchFiles(self._pattern)
            | "Open" >> fileio.ReadMatches()
            | "Chunks" >> beam.ParDo(ReadLineChunksFn(self._chunk_lines))
            | "Spread" >> beam.Reshuffle()
        )


class ParseReviewFn(beam.DoFn):
    """(file, lines) -> (user, (timestamp, item, rating)); bad lines to dead letter.

    Counts are kept per bundle and emitted once in `finish_bundle`, to the
    `stats` output and to Beam metrics.
    """

    def __init__(self, fmt: str, min_rating: float | None, header: str | None = None):
        self._fmt = fmt
        self._min_rating = min_rating
        self._header = header

    def setup(self) -> None:
        self._parse = formats.parser_for(self._fmt, self._header)

    def start_bundle(self) -> None:
        self._counts: collections.Counter = collections.Counter()

    def process(self, element: tuple[str, list[str]]) -> Iterator:
        path, lines = element
        counts = self._counts
        min_rating = self._min_rating
        counts["lines_read"] += len(lines)
        for line in lines:
            if not line.strip():
                counts["blank_lines"] += 1
                continue
            try:
                events = list(self._parse(line))
            except formats.MalformedRecord as e:
                counts["malformed_lines"] += 1
                _LOG.debug("Malformed line in %s: %s", path, e.reason)
                yield pvalue.TaggedOutput(
                    DEAD_LETTER, formats.dead_letter_record(path, line, e.reason)
                )
                continue
            for event in events:
                counts["events_read"] += 1
                if (
                    min_rating is not None
                    and event.rating is not None
                    and event.rating <= min_rating
                ):
                    counts["dropped_by_rating"] += 1
                    continue
                yield event.user, (event.timestamp, event.item, event.rating)

    def finish_bundle(self) -> Iterator:
        for key, value in self._counts.items():
            Metrics.counter("genni.preprocess", key).inc(value)
            yield _stat(key, value)


class ParseReviews(beam.PTransform):
    """Lines to keyed events, plus `dead_letter` and `stats` outputs.

    `header`: the log's first line, for a format that reads its columns from
    it (`formats.HEADED`; `inmemory.log_header`)."""

    def __init__(self, fmt: str, min_rating: float | None, header: str | None = None):
        super().__init__()
        self._fmt = fmt
        self._min_rating = min_rating
        self._header = header

    def expand(self, lines: beam.PCollection) -> pvalue.DoOutputsTuple:
        return lines | "Parse" >> beam.ParDo(
            ParseReviewFn(self._fmt, self._min_rating, self._header)
        ).with_outputs(DEAD_LETTER, STATS, main=EVENTS)


class OrderUserEventsFn(beam.DoFn):
    """(user, events) -> (user, items in time order), counting duplicates."""

    def start_bundle(self) -> None:
        self._duplicates = self._users = 0

    def process(self, element: tuple[str, Iterable]) -> Iterator[tuple[str, list[str]]]:
        user, events = element
        items, duplicates = sequences.order_events(events)
        self._duplicates += duplicates
        self._users += 1
        yield user, items

    def finish_bundle(self) -> Iterator:
        yield _stat("duplicate_events", self._duplicates)
        yield _stat("users_before_kcore", self._users)


class BuildUserSequences(beam.PTransform):
    """Keyed events to batches of (user, ordered items); `stats` counts duplicates."""

    def expand(self, events: beam.PCollection) -> dict[str, beam.PCollection]:
        ordered = (
            events
            | "GroupByUser" >> beam.GroupByKey()
            | "Order"
            >> beam.ParDo(OrderUserEventsFn()).with_outputs(STATS, main="users")
        )
        batches = (
            ordered.users
            | "Batch"
            >> beam.BatchElements(min_batch_size=MIN_BATCH, max_batch_size=MAX_BATCH)
            | "Pack" >> beam.Map(sequences.pack_users)
        )
        return {"batches": batches, STATS: ordered[STATS]}


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
    removed. Returns `batches` (the kept users) and `stats` (item count before,
    events removed per round).
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
        }


def _first_appearance(batch: UserBatch) -> Iterator[dict]:
    """{item: (user, position)} of each item's first event within the batch."""
    first: dict = {}
    for user, items in sorted(sequences.unpack_users(batch)):
        for position, item in enumerate(items):
            if item not in first:
                first[item] = (user, position)
    yield first


class AssignIds(beam.PTransform):
    """Vocabularies as singletons: sorted users, items by first appearance."""

    def expand(self, batches: beam.PCollection) -> dict[str, beam.PCollection]:
        users = (
            batches
            | "UserIds"
            >> beam.FlatMap(lambda b: [u for u, _ in sequences.unpack_users(b)])
            | "AllUsers" >> beam.combiners.ToList()
            | "SortUsers" >> beam.Map(sorted)
        )
        items = (
            batches
            | "FirstAppearance" >> beam.FlatMap(_first_appearance)
            | "MinPerItem" >> beam.CombineGlobally(MinPerKeyFn())
            | "SortItems"
            >> beam.Map(lambda first: sorted(first, key=first.__getitem__))
        )
        return {"users": users, "items": items}


class EncodeExamplesFn(beam.DoFn):
    """A batch of users to serialized examples, tagged by split."""

    def __init__(self, max_len: int):
        self._max_len = max_len

    def start_bundle(self) -> None:
        self._counts: collections.Counter = collections.Counter()

    def process(self, batch: UserBatch, users: list[str], items: list[str]) -> Iterator:
        user_ids, item_ids = self._lookups(users, items)
        for user, raw_items in sequences.unpack_users(batch):
            ids = [item_ids[i] for i in raw_items]
            self._counts["events"] += len(ids)
            self._counts.update(sequences.prefixed_repeat_counts(ids))
            for split, features in sequences.split_examples(ids, self._max_len).items():
                self._counts[f"examples_{split}"] += 1
                yield pvalue.TaggedOutput(
                    split, sequences.encode_example(user_ids[user], features)
                )

    def _lookups(self, users: list[str], items: list[str]) -> tuple[dict, dict]:
        # Side inputs are the same objects within a worker: build the maps once.
        key = (id(users), id(items))
        if getattr(self, "_key", None) != key:
            self._key = key
            self._maps = (
                {u: i for i, u in enumerate(users, start=1)},
                {it: i for i, it in enumerate(items, start=1)},
            )
        return self._maps

    def finish_bundle(self) -> Iterator:
        for key, value in self._counts.items():
            yield _stat(key, value)


def _write_lines(lines: list[str], path: str) -> None:
    outputs.write_text(path, lines)


def _write_sequences(batches: list[UserBatch], path: str) -> None:
    # Lines start with `user<TAB>`, and a tab sorts before any id character.
    lines = sorted(line for batch in batches for line in batch.split("\n"))
    outputs.write_text(path, lines)


def _write_attributes(items: list[str], source: str, path: str) -> tuple[str, dict]:
    return ("item_attributes", inmemory.write_item_attributes(source, items, path))


def _stats_json(
    pairs: list[tuple[str, object]], config: PreprocessConfig, fmt: str, path: str
) -> None:
    summed: collections.Counter = collections.Counter()
    extra = {}
    for key, value in pairs:
        if isinstance(value, dict):
            extra[key] = value
        else:
            summed[key] += value
    rounds = [
        summed[f"kcore_removed_round_{r}"]
        for r in range(1, config.max_kcore_rounds + 2)
    ]
    kcore = {
        "rounds": sum(1 for n in rounds if n),
        "users_removed": summed["users_before_kcore"] - summed["users"],
        "items_removed": summed["kcore_items_before"] - summed["items"],
        "events_removed": sum(rounds),
    }
    stats = sequences.assemble_stats(
        config=inmemory.run_settings(config, fmt),
        counters=summed,
        kcore=kcore,
        final={
            "users": summed["users"],
            "items": summed["items"],
            "events": summed["events"],
        },
        examples={s: summed[f"examples_{s}"] for s in schema.SPLITS},
        repeats=summed,
        item_attributes=extra.get("item_attributes"),
    )
    outputs.write_json(path, stats)


def build_pipeline(
    p: beam.Pipeline, config: PreprocessConfig, fmt: str, staging: str
) -> None:
    """Add the whole preprocessing graph, writing into `staging`, to `p`."""
    join = FileSystems.join
    parsed = (
        p
        | "ReadLogs" >> ReadLogs(config.input)
        | "ParseReviews"
        >> ParseReviews(fmt, config.min_rating, inmemory.log_header(config.input, fmt))
    )
    users = parsed[EVENTS] | "BuildUserSequences" >> BuildUserSequences()
    core = users["batches"] | "KCoreFilter" >> KCoreFilter(
        config.min_count, config.max_kcore_rounds
    )
    vocab = core["batches"] | "AssignIds" >> AssignIds()
    examples = core["batches"] | "EncodeExamples" >> beam.ParDo(
        EncodeExamplesFn(config.max_len),
        beam.pvalue.AsSingleton(vocab["users"]),
        beam.pvalue.AsSingleton(vocab["items"]),
    ).with_outputs(STATS, *schema.SPLITS)

    for split in schema.SPLITS:
        _ = examples[split] | f"Write{split.title()}" >> beam.io.WriteToTFRecord(
            join(staging, split),
            file_name_suffix=schema.TFRECORD_SUFFIX,
            compression_type=beam.io.filesystem.CompressionTypes.GZIP,
        )
    _ = parsed[DEAD_LETTER] | "WriteDeadLetter" >> beam.io.WriteToText(
        join(staging, schema.DEAD_LETTER_DIR, schema.DEAD_LETTER_PREFIX),
        file_name_suffix=".jsonl",
    )
    _ = vocab["items"] | "WriteItems" >> beam.Map(
        _write_lines, path=join(staging, schema.ITEMS_FILE)
    )
    _ = vocab["users"] | "WriteUsers" >> beam.Map(
        _write_lines, path=join(staging, schema.USERS_FILE)
    )
    _ = (
        core["batches"]
        | "AllSequences" >> beam.combiners.ToList()
        | "WriteSequences"
        >> beam.Map(_write_sequences, path=join(staging, schema.SEQUENCES_FILE))
    )
    vocab_sizes = (
        vocab["users"] | "NumUsers" >> beam.Map(lambda u: ("users", len(u))),
        vocab["items"] | "NumItems" >> beam.Map(lambda i: ("items", len(i))),
    )
    stat_sources = [
        parsed[STATS],
        users[STATS],
        core[STATS],
        examples[STATS],
        *vocab_sizes,
    ]
    if config.item_attributes:
        stat_sources.append(
            vocab["items"]
            | "WriteItemAttributes"
            >> beam.Map(
                _write_attributes,
                source=config.item_attributes,
                path=join(staging, schema.ITEM_ATTRIBUTES_FILE),
            )
        )
    _ = (
        stat_sources
        | "FlattenStats" >> beam.Flatten()
        | "AllStats" >> beam.combiners.ToList()
        | "WriteStats"
        >> beam.Map(
            _stats_json, config=config, fmt=fmt, path=join(staging, schema.STATS_FILE)
        )
    )


def preprocess(
    config: PreprocessConfig, pipeline_args: list[str] | None = None
) -> dict:
    """Run the Beam pipeline for `config`; returns the stats of the new dataset.

    Raises:
        FileNotFoundError: no input file matches.
        OutputExistsError: the output is not empty and `overwrite` is off.
        ValueError: unknown format, or nothing left after filtering.
        RuntimeError: k-core filtering did not converge in `max_kcore_rounds`.
    """
    fmt = inmemory.check_inputs(config)
    staging = outputs.staging_dir(config.output)
    options = PipelineOptions(pipeline_args or [])
    try:
        with beam.Pipeline(options=options) as p:
            build_pipeline(p, config, fmt, staging)
        stats = outputs.read_json(FileSystems.join(staging, schema.STATS_FILE))
        if stats["kcore"]["rounds"] > config.max_kcore_rounds:
            raise RuntimeError(
                f"k-core filtering did not converge in {config.max_kcore_rounds} "
                "rounds; raise --max-kcore-rounds."
            )
        if stats["users"] == 0:
            raise ValueError(inmemory.empty_error(stats, config))
        outputs.commit(staging, config.output)
    except BaseException:
        outputs.remove_tree(staging)
        raise
    return stats

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

The FnApiRunner (what Beam's DirectRunner falls back to) is the default,
chosen, not discovered (`genni.pipeline.beam_options`: Beam alone would first
try to download Prism); any runner is chosen with the standard pipeline options, e.g.
`--runner=DataflowRunner --project=... --region=...
--temp_location=gs://... --setup_file=./setup.py` or `--runner=FlinkRunner
--flink_master=host:8081`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Iterator, Mapping

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from genni.components import schema
from genni.pipeline.beam_options import pipeline_options
from genni.pipeline.preprocess import formats, inmemory, outputs, sequences
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.preprocess.kcore import (  # noqa: F401 (this module's API too)
    STATS,
    CounterSumFn,
    KCoreFilter,
    KCoreRoundFn,
    UserBatch,
    pack_counts,
    unpack_counts,
)
from genni.pipeline.preprocess.reading import (  # noqa: F401 (this module's API too)
    CHUNK_LINES,
    READ_BLOCK_BYTES,
    ReadLineChunksFn,
    ReadLogs,
)

_LOG = logging.getLogger(__name__)

EVENTS = "events"
DEAD_LETTER = "dead_letter"

MIN_BATCH = 64
MAX_BATCH = 2048


def _stat(key: str, value: int) -> pvalue.TaggedOutput:
    """A statistic emitted from `finish_bundle` (which needs a windowed value)."""
    return pvalue.TaggedOutput(STATS, GlobalWindows.windowed_value((key, value)))


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


class ParseReviewFn(beam.DoFn):
    """(file, first line's number, lines) -> (user, (timestamp, item, rating));
    bad lines (unreadable, not UTF-8) to the dead letter with file and number.

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

    def process(self, element: tuple[str, int, list[bytes]]) -> Iterator:
        path, first, lines = element
        counts = self._counts
        min_rating = self._min_rating
        counts["lines_read"] += len(lines)
        for number, raw in enumerate(lines, start=first):
            try:
                events = formats.read_line(self._parse, self._fmt, raw, number)
            except formats.MalformedRecord as e:
                counts["malformed_lines"] += 1
                _LOG.debug("Malformed line %d of %s: %s", number, path, e.reason)
                yield pvalue.TaggedOutput(
                    DEAD_LETTER,
                    formats.dead_letter_record(path, raw, e.reason, number),
                )
                continue
            for event in formats.kept_events(events, min_rating, counts):
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


class OrderTimedEventsFn(OrderUserEventsFn):
    """(user, events) -> (user, (timestamp, item) in time order), for the
    split by time."""

    def process(self, element: tuple[str, Iterable]) -> Iterator:
        user, events = element
        timed, duplicates = sequences.order_timed_events(events)
        self._duplicates += duplicates
        yield user, timed

    def finish_bundle(self) -> Iterator:
        # Users before the k-core are those with training events (`TimeSplit`).
        yield _stat("duplicate_events", self._duplicates)


class EncodeTimeSplitFn(beam.DoFn):
    """(user, {timed, kept}) to serialized examples of the split by time
    (`sequences.time_split_examples`), tagged by split."""

    def __init__(self, max_len: int):
        self._max_len = max_len

    def start_bundle(self) -> None:
        self._counts: collections.Counter = collections.Counter()

    def process(
        self, element, users: list[str], items: list[str], cutoffs, met: str
    ) -> Iterator:
        user, parts = element
        (timed,) = parts["timed"]
        kept = next(iter(parts["kept"]), None)
        user_ids, item_ids = _vocab_maps(self, users, items)
        if getattr(self, "_met_block", None) is not met:  # Once per worker.
            self._met_block, self._met = met, set(unpack_counts(met))
        examples, counts = sequences.time_split_examples(
            timed, kept, item_ids, tuple(cutoffs), self._max_len, self._met
        )
        self._counts.update(counts)
        self._counts["events"] += len(kept or ())
        for split, features in examples.items():
            self._counts[f"examples_{split}"] += len(features)
            for feature in features:
                yield pvalue.TaggedOutput(
                    split, sequences.encode_example(user_ids[user], feature)
                )

    def finish_bundle(self) -> Iterator:
        for key, value in self._counts.items():
            yield _stat(key, value)


class TimeSplit(beam.PTransform):
    """Keyed events to the split by time: the cutoffs from the log's last
    event, the k-core and vocabularies over the events before the validation
    cutoff alone, then every user's examples. Returns `batches` (the kept
    training sequences), `users`, `items`, `examples` and `stats`."""

    def __init__(self, config: PreprocessConfig):
        super().__init__()
        self._config = config

    def expand(self, events: beam.PCollection) -> dict:
        config = self._config
        valid_days, test_days = config.windows
        timed = ordered_per_user(events, OrderTimedEventsFn())
        span = (
            timed.users
            | "UserSpan" >> beam.Map(lambda ue: (ue[1][0][0], ue[1][-1][0]))
            | "LogSpan" >> beam.CombineGlobally(_log_span)
        )
        cutoffs = span | "Cutoffs" >> beam.Map(
            lambda first_last: sequences.time_cutoffs(
                first_last[1], test_days, valid_days
            )
        )
        training = _packed(
            timed.users
            | "BeforeCutoff"
            >> beam.FlatMap(_before_cutoff, beam.pvalue.AsSingleton(cutoffs))
        )
        core = training | "KCoreFilter" >> KCoreFilter(
            config.min_count, config.max_kcore_rounds
        )
        vocab = core["batches"] | "AssignIds" >> AssignIds()
        kept_sizes = _kept_sizes(vocab)
        vocab = {
            "users": vocab["users"],
            "items": vocab["items"]
            | "KeepPreviousItems" >> KeepPreviousIds(config.previous, "items"),
        }
        before_catalog = vocab["items"]
        vocab["items"] = add_catalog(vocab["items"], config.item_attributes)
        users = (
            timed.users
            | "AllUsers" >> beam.Keys()
            | "ToList" >> beam.combiners.ToList()
            | "KeptFirst"  # Users met only in the windows come after.
            >> beam.Map(
                lambda every, kept: kept + sorted(set(every) - set(kept)),
                beam.pvalue.AsSingleton(vocab["users"]),
            )
            | "KeepPreviousUsers" >> KeepPreviousIds(config.previous, "users")
        )
        kept = core["batches"] | "Unpack" >> beam.FlatMap(sequences.unpack_users)
        examples = (
            {"timed": timed.users, "kept": kept}
            | "Join" >> beam.CoGroupByKey()
            | "Encode"
            >> beam.ParDo(
                EncodeTimeSplitFn(config.max_len),
                beam.pvalue.AsSingleton(users),
                beam.pvalue.AsSingleton(vocab["items"]),
                beam.pvalue.AsSingleton(cutoffs),
                beam.pvalue.AsSingleton(core["initial"]),
            ).with_outputs(STATS, *schema.SPLITS)
        )
        cutoff_stat = cutoffs | "CutoffStat" >> beam.Map(
            lambda cuts, first_last: (
                "time_cutoffs",
                {
                    "valid": cuts[0],
                    "test": cuts[1],
                    "first": first_last[0],
                    "last": first_last[1],
                },
            ),
            beam.pvalue.AsSingleton(span),
        )
        training_users = training | "TrainingUsers" >> beam.Map(
            lambda batch: ("users_before_kcore", len(sequences.unpack_users(batch)))
        )
        stats = [timed[STATS], core[STATS], cutoff_stat, *kept_sizes, training_users]
        return {
            "batches": core["batches"],
            "users": users,
            "items": vocab["items"],
            "items_before_catalog": before_catalog,
            "examples": examples,
            STATS: stats | "FlattenStats" >> beam.Flatten(),
        }


def _log_span(spans: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(first, last) event time over users' (first, last)s."""
    spans = list(spans)
    return min(s[0] for s in spans), max(s[1] for s in spans)


def _before_cutoff(user_events: tuple, cutoffs: tuple) -> list:
    """[(user, items before the validation cutoff)], or [] if it has none."""
    user, timed = user_events
    items = sequences.training_items(timed, cutoffs[0])
    return [(user, items)] if items else []


class BuildUserSequences(beam.PTransform):
    """Keyed events to batches of (user, ordered items); `stats` counts duplicates."""

    def expand(self, events: beam.PCollection) -> dict[str, beam.PCollection]:
        ordered = ordered_per_user(events, OrderUserEventsFn())
        return {"batches": _packed(ordered.users), STATS: ordered[STATS]}


def ordered_per_user(events: beam.PCollection, order: beam.DoFn):
    """Keyed events grouped by user and ordered by `order` (main output
    `users`, and `stats`)."""
    return (
        events
        | "GroupByUser" >> beam.GroupByKey()
        | "Order" >> beam.ParDo(order).with_outputs(STATS, main="users")
    )


def _packed(users: beam.PCollection) -> beam.PCollection:
    """(user, items) pairs to packed batches (`UserBatch`)."""
    return (
        users
        | "Batch"
        >> beam.BatchElements(min_batch_size=MIN_BATCH, max_batch_size=MAX_BATCH)
        | "Pack" >> beam.Map(sequences.pack_users)
    )


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


class KeepPreviousIds(beam.PTransform):
    """A vocabulary singleton (`which`: "users" or "items") with every id of
    an earlier output kept and new ones after them
    (`sequences.extend_vocabulary`; `genni preprocess --previous`); itself
    without one."""

    def __init__(self, previous: str | None, which: str):
        super().__init__()
        self._previous = previous
        self._which = which

    def expand(self, vocabulary: beam.PCollection) -> beam.PCollection:
        if not self._previous:
            return vocabulary
        return vocabulary | "Extend" >> beam.Map(
            _extend_vocabulary, self._previous, self._which
        )


def add_catalog(items: beam.PCollection, catalog: str | None) -> beam.PCollection:
    """The item vocabulary singleton with the items file's items that have no
    events after its own (sorted; `sequences.extend_vocabulary`)."""
    if not catalog:
        return items
    return items | "AddCatalogItems" >> beam.Map(_with_catalog, catalog)


def _with_catalog(items: list[str], catalog: str) -> list[str]:
    from genni.pipeline.preprocess.catalog import read_catalog

    return sequences.extend_vocabulary(items, sorted(read_catalog(catalog).items))


def _extend_vocabulary(current: list[str], previous: str, which: str) -> list[str]:
    users, items = outputs.read_vocabulary(previous)  # On the worker.
    return sequences.extend_vocabulary(users if which == "users" else items, current)


def _kept_sizes(vocab: dict) -> list[beam.PCollection]:
    """The k-core's kept users and items (before `--previous` adds its own),
    as stats."""
    return [
        vocab["users"]
        | "KeptUsers" >> beam.Map(lambda kept: ("kcore_users_kept", len(kept))),
        vocab["items"]
        | "KeptItems" >> beam.Map(lambda kept: ("kcore_items_kept", len(kept))),
    ]


def _vocab_maps(fn: beam.DoFn, users: list[str], items: list[str]) -> tuple[dict, dict]:
    """{user: id} and {item: id} of the vocabularies, kept on the DoFn `fn`:
    side inputs are the same objects within a worker, so they are built once."""
    key = (id(users), id(items))
    if getattr(fn, "_vocab_key", None) != key:
        fn._vocab_key = key
        fn._vocab_maps = (
            {u: i for i, u in enumerate(users, start=1)},
            {it: i for i, it in enumerate(items, start=1)},
        )
    return fn._vocab_maps


class EncodeExamplesFn(beam.DoFn):
    """A batch of users to serialized examples, tagged by split; `hold_out`:
    (share, seed) of the items held out of training and validation
    (`sequences.held_out_items`), or None."""

    def __init__(self, max_len: int, hold_out: tuple[float, int] | None = None):
        self._max_len = max_len
        self._hold_out = hold_out

    def start_bundle(self) -> None:
        self._counts: collections.Counter = collections.Counter()

    def process(
        self,
        batch: UserBatch,
        users: list[str],
        items: list[str],
        kept: list[str] | None = None,
    ) -> Iterator:
        """`kept`: the items with events (`items` before the items file adds
        its own; default `items`), among which held-out items are drawn."""
        kept = items if kept is None else kept
        user_ids, item_ids = _vocab_maps(self, users, items)
        held_out = frozenset()
        if self._hold_out:  # The same draw on every worker, made once.
            if getattr(self, "_held_key", None) != id(kept):
                self._held_key = id(kept)
                self._held = sequences.held_out_items(kept, *self._hold_out)
            held_out = self._held
        for user, raw_items in sequences.unpack_users(batch):
            ids = [item_ids[i] for i in raw_items]
            self._counts["events"] += len(ids)
            self._counts.update(sequences.prefixed_repeat_counts(ids))
            self._counts.update(sequences.hold_out_counts(ids, held_out))
            examples = sequences.split_examples(ids, self._max_len, held_out)
            for split, features in examples.items():
                self._counts[f"examples_{split}"] += 1
                yield pvalue.TaggedOutput(
                    split, sequences.encode_example(user_ids[user], features)
                )

    def finish_bundle(self) -> Iterator:
        for key, value in self._counts.items():
            yield _stat(key, value)


def _write_lines(lines: list[str], path: str) -> None:
    outputs.write_text(path, lines)


def _write_sequences(batches: list[UserBatch], path: str) -> None:
    # Lines start with `user<TAB>`, and a tab sorts before any id character.
    lines = sorted(line for batch in batches for line in batch.split("\n"))
    outputs.write_text(path, lines)


def _write_attributes(
    items: list[str], before: list[str], source: str, path: str
) -> tuple[str, dict]:
    from genni.pipeline.preprocess.catalog import read_catalog

    catalog = read_catalog(source)  # On the worker (as `_with_catalog`).
    stats = inmemory.write_item_attributes(catalog, source, items, path, len(before))
    return ("item_attributes", stats)


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
        "users_removed": summed["users_before_kcore"]
        - summed.get("kcore_users_kept", summed["users"]),
        "items_removed": summed["kcore_items_before"]
        - summed.get("kcore_items_kept", summed["items"]),
        "events_removed": sum(rounds),
        "items_before": summed["kcore_items_before"],
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
    if "time_cutoffs" in extra:
        cuts = extra["time_cutoffs"]
        stats["time_split"] = sequences.time_stats(
            summed,
            (cuts["valid"], cuts["test"]),
            *config.windows,
            span=(cuts["first"], cuts["last"]),
            min_cases=config.min_cases,
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
    if config.split == sequences.TIME:
        split = parsed[EVENTS] | "TimeSplit" >> TimeSplit(config)
        core = {"batches": split["batches"]}
        vocab = {"users": split["users"], "items": split["items"]}
        before_catalog = split["items_before_catalog"]
        examples = split["examples"]
        stat_sources = [parsed[STATS], split[STATS], examples[STATS]]
    else:
        users = parsed[EVENTS] | "BuildUserSequences" >> BuildUserSequences()
        core = users["batches"] | "KCoreFilter" >> KCoreFilter(
            config.min_count, config.max_kcore_rounds
        )
        vocab = core["batches"] | "AssignIds" >> AssignIds()
        kept_sizes = _kept_sizes(vocab)
        kept_items = vocab["items"]  # Held-out items are drawn among these.
        vocab = {
            which: vocab[which]
            | f"KeepPrevious{which.title()}" >> KeepPreviousIds(config.previous, which)
            for which in ("users", "items")
        }
        before_catalog = vocab["items"]
        vocab["items"] = add_catalog(vocab["items"], config.item_attributes)
        examples = core["batches"] | "EncodeExamples" >> beam.ParDo(
            EncodeExamplesFn(
                config.max_len,
                (config.hold_out_items, config.hold_out_seed)
                if config.hold_out_items
                else None,
            ),
            beam.pvalue.AsSingleton(vocab["users"]),
            beam.pvalue.AsSingleton(vocab["items"]),
            beam.pvalue.AsSingleton(kept_items),
        ).with_outputs(STATS, *schema.SPLITS)
        stat_sources = [parsed[STATS], users[STATS], core[STATS], examples[STATS]]
        stat_sources += kept_sizes

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
    stat_sources += vocab_sizes
    if config.item_attributes:
        stat_sources.append(
            vocab["items"]
            | "WriteItemAttributes"
            >> beam.Map(
                _write_attributes,
                beam.pvalue.AsSingleton(before_catalog),
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
    options = pipeline_options(pipeline_args)
    with outputs.job_staging(staging, config.output):
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
    return stats

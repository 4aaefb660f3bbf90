"""Single-process implementation of `genni preprocess`, for small logs and checks.

It runs the same steps as the Beam pipeline with plain Python dictionaries and
writes the same files, byte for byte in the single files. Tests use it as an
oracle for the Beam pipeline, and `benchmarks/preprocess.py` as the baseline the
Beam DirectRunner is timed against. Use the Beam pipeline for anything that does
not fit in one machine's memory.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping

from genni.components import schema
from genni.pipeline.preprocess import formats, outputs, sequences
from genni.pipeline.preprocess.config import PreprocessConfig


def read_events(
    config: PreprocessConfig, fmt: str
) -> tuple[dict[str, list], list[str], collections.Counter]:
    """Parse, rating-filter and group the log by user; malformed lines set aside."""
    counters: collections.Counter = collections.Counter()
    by_user: dict[str, list] = collections.defaultdict(list)
    dead_letters = []
    parse = formats.parser_for(fmt, log_header(config.input, fmt))
    for path, number, raw in outputs.iter_raw_lines(config.input):
        counters["lines_read"] += 1
        try:
            events = formats.read_line(parse, fmt, raw, number)
        except formats.MalformedRecord as e:
            counters["malformed_lines"] += 1
            dead_letters.append(formats.dead_letter_record(path, raw, e.reason, number))
            continue
        for event in formats.kept_events(events, config.min_rating, counters):
            by_user[event.user].append((event.timestamp, event.item, event.rating))
    return by_user, dead_letters, counters


def kcore(
    user_items: dict[str, list[str]], min_count: int, max_rounds: int
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Iterative k-core; returns the kept sequences and what was removed."""
    counts = collections.Counter(i for items in user_items.values() for i in items)
    users_before, items_before = len(user_items), len(counts)
    rounds = events_removed = 0
    while True:
        kept, removed = sequences.kcore_pass(user_items.items(), counts, min_count)
        if not removed:
            break
        rounds += 1
        if rounds > max_rounds:
            raise RuntimeError(
                f"k-core filtering did not converge in {max_rounds} rounds; "
                "raise --max-kcore-rounds."
            )
        events_removed += sum(removed.values())
        counts.subtract(removed)
        counts = +counts
        user_items = dict(kept)
    return user_items, {
        "rounds": rounds,
        "users_removed": users_before - len(user_items),
        "items_removed": items_before - len(counts),
        "events_removed": events_removed,
        "items_before": items_before,
    }


def check_inputs(config: PreprocessConfig) -> str:
    """Fail early on a missing input or a busy output; returns the log format."""
    outputs.input_files(config.input)
    outputs.check_output(config.output, config.overwrite)
    fmt = log_format(config.input, config.format, config.min_rating)
    if config.split == sequences.TIME and fmt == formats.SEQUENCES:
        raise ValueError(
            "--split time needs timestamps, and the sequences format has none."
        )
    return fmt


def log_format(pattern: str, fmt: str, min_rating: float | None) -> str:
    """The format of the logs matching `pattern`: `fmt`, or detected for
    "auto"; an error if it cannot be told or has no ratings to filter on."""
    undecodable: list = []
    try:
        fmt = formats.resolve_format(fmt, _text_lines(pattern, undecodable))
    except ValueError as e:
        if not undecodable:
            raise ValueError(f"{pattern}: {e}") from None
        path, number = undecodable[0]
        raise ValueError(
            f"{pattern}: cannot tell its format: line {number} of {path} and "
            f"{len(undecodable) - 1} more of its first lines are not UTF-8 text "
            f"(is it a text log?); {e}"
        ) from None
    if fmt == formats.SEQUENCES and min_rating is not None:
        raise ValueError(
            "--min-rating needs ratings, and the sequences format has none."
        )
    if fmt in formats.HEADED:  # Its header must name the columns it needs.
        formats.parser_for(fmt, log_header(pattern, fmt))
    return fmt


def log_header(pattern: str, fmt: str) -> str | None:
    """The log's first non-blank line, for a format that reads its columns
    from it (`formats.HEADED`); None for the others."""
    if fmt not in formats.HEADED:
        return None
    return next((line for line in _text_lines(pattern) if line.strip()), None)


def _text_lines(pattern: str, undecodable: list | None = None):
    """The log's lines that are text (for detecting its format and header:
    a line that is not UTF-8 goes to the dead letter when read); the (file,
    line number) of those that are not are added to `undecodable`."""
    for path, number, raw in outputs.iter_raw_lines(pattern):
        try:
            yield formats.decode(raw)
        except formats.MalformedRecord:
            if undecodable is not None:
                undecodable.append((path, number))


def run(config: PreprocessConfig) -> dict:
    """Preprocess `config.input` into `config.output`; returns the stats."""
    fmt = check_inputs(config)
    by_user, dead_letters, counters = read_events(config, fmt)

    timed: dict[str, sequences.TimedItems] = {}
    for user, events in by_user.items():
        timed[user], duplicates = sequences.order_timed_events(events)
        counters["duplicate_events"] += duplicates
    cutoffs = None
    if config.split == sequences.TIME:
        last = max(t for events in timed.values() for t, _ in events)
        first = min(events[0][0] for events in timed.values())
        cutoffs = sequences.time_cutoffs(last, config.windows[1], config.windows[0])
        # Only what came before the validation cutoff is learned or counted.
        user_items = {
            user: items
            for user, events in timed.items()
            if (items := sequences.training_items(events, cutoffs[0]))
        }
    else:
        user_items = {u: [i for _, i in events] for u, events in timed.items()}
    met = {item for items in user_items.values() for item in items}
    user_items, removed = kcore(user_items, config.min_count, config.max_kcore_rounds)
    if not user_items:
        raise ValueError(empty_error(counters, config))

    users = sorted(user_items)
    first_seen: dict[str, tuple[str, int]] = {}
    for user in users:
        for position, item in enumerate(user_items[user]):
            first_seen.setdefault(item, (user, position))
    items = sorted(first_seen, key=first_seen.__getitem__)
    item_ids = {item: i for i, item in enumerate(items, start=1)}
    if cutoffs is not None:  # Users met only in the windows come after.
        users += sorted(set(timed) - set(user_items))
    kept_items = items  # Held-out items are drawn among these.
    if config.previous:  # Every earlier id kept; new ones after them.
        previous_users, previous_items = outputs.read_vocabulary(config.previous)
        users = sequences.extend_vocabulary(previous_users, users)
        items = sequences.extend_vocabulary(previous_items, items)
        item_ids = {item: i for i, item in enumerate(items, start=1)}
    items_with_events, catalog = items, None
    if config.item_attributes:  # The items file's items without events last.
        from genni.pipeline.preprocess.catalog import read_catalog

        catalog = read_catalog(config.item_attributes)
        items = sequences.extend_vocabulary(items, sorted(catalog.items))
        item_ids = {item: i for i, item in enumerate(items, start=1)}

    staging = outputs.staging_dir(config.output)
    os.makedirs(staging)
    try:
        if cutoffs is None:
            held_out = frozenset()
            if config.hold_out_items:
                held_out = sequences.held_out_items(
                    kept_items, config.hold_out_items, config.hold_out_seed
                )
            examples = write_examples(
                staging, users, user_items, item_ids, config.max_len, held_out
            )
            counters["held_out_test_targets"] = examples["held_out_test_targets"]
            counters["kcore_items_kept"] = len(kept_items)
        else:
            examples = write_time_examples(
                staging,
                users,
                timed,
                user_items,
                item_ids,
                cutoffs,
                config.max_len,
                met,
            )
        outputs.write_text(os.path.join(staging, schema.ITEMS_FILE), items)
        outputs.write_text(os.path.join(staging, schema.USERS_FILE), users)
        outputs.write_text(
            os.path.join(staging, schema.SEQUENCES_FILE),
            (f"{u}\t{' '.join(user_items[u])}" for u in users if u in user_items),
        )
        os.makedirs(os.path.join(staging, schema.DEAD_LETTER_DIR))
        outputs.write_text(
            os.path.join(
                staging,
                schema.DEAD_LETTER_DIR,
                f"{schema.DEAD_LETTER_PREFIX}-00000-of-00001.jsonl",
            ),
            dead_letters,
        )
        attribute_stats = None
        if catalog is not None:
            attribute_stats = write_item_attributes(
                catalog,
                config.item_attributes,
                items,
                os.path.join(staging, schema.ITEM_ATTRIBUTES_FILE),
                len(items_with_events),
            )
        stats = sequences.assemble_stats(
            config=run_settings(config, fmt),
            counters=counters,
            kcore=removed,
            final={
                "users": len(users),
                "items": len(items),
                "events": sum(len(v) for v in user_items.values()),
            },
            examples=examples,
            repeats=examples,
            item_attributes=attribute_stats,
        )
        if cutoffs is not None:
            stats["time_split"] = sequences.time_stats(
                examples,
                cutoffs,
                *config.windows,
                span=(first, last),
                min_cases=config.min_cases,
            )
        outputs.write_json(os.path.join(staging, schema.STATS_FILE), stats)
        outputs.commit(staging, config.output)
    except BaseException:
        outputs.remove_tree(staging)
        raise
    return stats


def write_examples(
    directory: str,
    users: list[str],
    user_items: dict[str, list[str]],
    item_ids: dict[str, int],
    max_len: int,
    held_out: frozenset = frozenset(),
) -> dict[str, int]:
    """The leave-one-out examples (`sequences.split_examples`), without the
    `held_out` item ids but as test targets."""

    def examples_of(user: str) -> tuple[dict[str, list[dict]], dict[str, int]]:
        ids = [item_ids[i] for i in user_items[user]]
        repeats = sequences.prefixed_repeat_counts(ids)
        repeats.update(sequences.hold_out_counts(ids, held_out))
        examples = sequences.split_examples(ids, max_len, held_out)
        return {split: [features] for split, features in examples.items()}, repeats

    return _write_users(directory, users, user_items, examples_of)


def _write_users(
    directory: str, users: list[str], present, examples_of
) -> collections.Counter:
    """Each user of `users` in `present` (a `--previous` user not in this log
    has no examples), numbered from 1 in `users`' order: its examples,
    `examples_of(user)` -> ({split: [features, ...]}, its counts), written to
    each split's one shard (`_split_writers`). Returns the summed counts and
    the examples written per split."""
    writers = _split_writers(directory)
    counts: collections.Counter = collections.Counter()
    try:
        for user_id, user in enumerate(users, start=1):
            if user not in present:
                continue
            examples, user_counts = examples_of(user)
            counts.update(user_counts)
            for split, features in examples.items():
                for feature in features:
                    writers[split].write(sequences.encode_example(user_id, feature))
                counts[split] += len(features)
    finally:
        for writer in writers.values():
            writer.close()
    return counts


def run_settings(config: PreprocessConfig, fmt: str) -> dict:
    settings = {
        "format": fmt,
        "min_count": config.min_count,
        "min_rating": config.min_rating,
        "max_len": config.max_len,
    }
    if config.split != sequences.LEAVE_ONE_OUT:  # (Absent: leave-one-out.)
        settings["split"] = config.split
    if config.previous:  # (Absent: ids of this log alone.)
        settings["previous"] = config.previous
    if config.hold_out_items:  # (Absent: nothing held out.)
        settings["hold_out_items"] = config.hold_out_items
        settings["hold_out_seed"] = config.hold_out_seed
    return settings


def _split_writers(directory: str) -> dict:
    """A gzip TFRecord writer for each split's one shard in `directory`."""
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type="GZIP")
    return {
        split: tf.io.TFRecordWriter(
            os.path.join(directory, f"{split}-00000-of-00001{schema.TFRECORD_SUFFIX}"),
            options,
        )
        for split in schema.SPLITS
    }


def write_time_examples(
    directory: str,
    users: list[str],
    timed: dict[str, sequences.TimedItems],
    kept: dict[str, list[str]],
    item_ids: dict[str, int],
    cutoffs: tuple[float, float],
    max_len: int,
    met: set | frozenset = frozenset(),
) -> collections.Counter:
    """The examples of the split by time (`sequences.time_split_examples`);
    `met`: the items of the events before the validation cutoff."""

    def examples_of(user: str):
        return sequences.time_split_examples(
            timed[user], kept.get(user), item_ids, cutoffs, max_len, met
        )

    return _write_users(directory, users, timed, examples_of)


ITEMS_DEAD_LETTER = "items-00000-of-00001.jsonl"


def write_item_attributes(
    catalog, source: str, items: list[str], path: str, with_events: int | None = None
) -> dict:
    """Write the attributes of `catalog` (`catalog.read_catalog(source)`)
    re-keyed to item ids, and its unreadable lines to the dataset's dead
    letters (`dead_letter/items-*.jsonl`); returns their stats: the
    attributes, and how the items file and the vocabulary meet
    (`sequences.attribute_stats`); `with_events`: the items of `items` that
    came from the log (the file's own come after them)."""
    rekeyed = sequences.rekey_attributes(catalog.items, items)
    outputs.write_json(path, rekeyed)
    if catalog.malformed:
        outputs.write_text(
            os.path.join(
                os.path.dirname(path), schema.DEAD_LETTER_DIR, ITEMS_DEAD_LETTER
            ),
            (
                formats.dead_letter_record(source, line, "unreadable items-file line")
                for line in catalog.malformed
            ),
        )
    stats = sequences.attribute_stats(rekeyed, len(items), len(catalog.malformed))
    stats["catalog_items"] = len(catalog.items)
    stats["catalog_layout"] = catalog.layout
    stats["catalog_encoding"] = catalog.encoding
    from_log = items[: len(items) if with_events is None else with_events]
    # Listed items the log has no (kept) event of: in the vocabulary all the
    # same (`genni.pipeline.preprocess.catalog`).
    stats["catalog_items_without_events"] = len(items) - len(from_log)
    stats["items_not_in_catalog"] = sum(item not in catalog.items for item in from_log)
    return stats


def empty_error(counters: Mapping, config: PreprocessConfig) -> str:
    return (
        "No user is left after filtering: "
        f"{counters.get('lines_read', 0)} lines read, "
        f"{counters.get('malformed_lines', 0)} malformed, "
        f"{counters.get('dropped_by_rating', 0)} events dropped by --min-rating, "
        f"then nothing survived the {config.min_count}-core. "
        "Lower --min-count or --min-rating, or check --format."
    )

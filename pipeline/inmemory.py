"""Single-process implementation of `genni preprocess`, for small logs and checks.

It runs the same steps as the Beam pipeline with plain Python dictionaries and
writes the same files, byte for byte in the single files. Tests use it as an
oracle for the Beam pipeline, and `benchmarks/preprocess.py` as the baseline the
Beam DirectRunner is timed against. Use the Beam pipeline for anything that does
not fit in one machine's memory.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Mapping

from apache_beam.io.filesystems import FileSystems

from pipeline import formats, outputs, schema, sequences
from pipeline.configs import PreprocessConfig


def read_events(
    config: PreprocessConfig, fmt: str
) -> tuple[dict[str, list], list[str], collections.Counter]:
    """Parse, rating-filter and group the log by user; malformed lines set aside."""
    counters: collections.Counter = collections.Counter()
    by_user: dict[str, list] = collections.defaultdict(list)
    dead_letters = []
    parse = formats.PARSERS[fmt]
    for path, line in outputs.iter_lines(config.input):
        counters["lines_read"] += 1
        if not line.strip():
            counters["blank_lines"] += 1
            continue
        try:
            events = list(parse(line))
        except formats.MalformedRecord as e:
            counters["malformed_lines"] += 1
            dead_letters.append(formats.dead_letter_record(path, line, e.reason))
            continue
        for event in events:
            counters["events_read"] += 1
            if (
                config.min_rating is not None
                and event.rating is not None
                and event.rating <= config.min_rating
            ):
                counters["dropped_by_rating"] += 1
                continue
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
    }


def check_inputs(config: PreprocessConfig) -> str:
    """Fail early on a missing input or a busy output; returns the log format."""
    outputs.input_files(config.input)
    outputs.check_output(config.output, config.overwrite)
    fmt = formats.resolve_format(
        config.format, (line for _, line in outputs.iter_lines(config.input))
    )
    if fmt == formats.SEQUENCES and config.min_rating is not None:
        raise ValueError(
            "--min-rating needs ratings, and the sequences format has none."
        )
    return fmt


def run(config: PreprocessConfig) -> dict:
    """Preprocess `config.input` into `config.output`; returns the stats."""
    fmt = check_inputs(config)
    by_user, dead_letters, counters = read_events(config, fmt)

    user_items = {}
    for user, events in by_user.items():
        user_items[user], duplicates = sequences.order_events(events)
        counters["duplicate_events"] += duplicates
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

    staging = outputs.staging_dir(config.output)
    os.makedirs(staging)
    try:
        examples = write_examples(staging, users, user_items, item_ids, config.max_len)
        outputs.write_text(os.path.join(staging, schema.ITEMS_FILE), items)
        outputs.write_text(os.path.join(staging, schema.USERS_FILE), users)
        outputs.write_text(
            os.path.join(staging, schema.SEQUENCES_FILE),
            (f"{u}\t{' '.join(user_items[u])}" for u in users),
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
        if config.item_attributes:
            rekeyed = sequences.rekey_attributes(
                load_item_attributes(config.item_attributes), items
            )
            outputs.write_json(
                os.path.join(staging, schema.ITEM_ATTRIBUTES_FILE), rekeyed
            )
            attribute_stats = sequences.attribute_stats(rekeyed, len(items))
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
            item_attributes=attribute_stats,
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
) -> dict[str, int]:
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type="GZIP")
    writers = {
        split: tf.io.TFRecordWriter(
            os.path.join(directory, f"{split}-00000-of-00001{schema.TFRECORD_SUFFIX}"),
            options,
        )
        for split in schema.SPLITS
    }
    counts: collections.Counter = collections.Counter()
    try:
        for user_id, user in enumerate(users, start=1):
            ids = [item_ids[i] for i in user_items[user]]
            for split, features in sequences.split_examples(ids, max_len).items():
                writers[split].write(sequences.encode_example(user_id, features))
                counts[split] += 1
    finally:
        for writer in writers.values():
            writer.close()
    return counts


def run_settings(config: PreprocessConfig, fmt: str) -> dict:
    return {
        "format": fmt,
        "min_count": config.min_count,
        "min_rating": config.min_rating,
        "max_len": config.max_len,
    }


def load_item_attributes(path: str) -> dict[str, list]:
    """S3-Rec `item2attributes.json`: {raw item id: [attribute, ...]}."""
    try:
        with FileSystems.open(path) as f:
            raw = json.loads(f.read().decode("utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"Cannot read --item-attributes {path!r}: {e}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise ValueError(
            f"--item-attributes {path!r} must map item ids to lists of attributes."
        )
    return {str(k): v for k, v in raw.items()}


def empty_error(counters: Mapping, config: PreprocessConfig) -> str:
    return (
        "No user is left after filtering: "
        f"{counters.get('lines_read', 0)} lines read, "
        f"{counters.get('malformed_lines', 0)} malformed, "
        f"{counters.get('dropped_by_rating', 0)} events dropped by --min-rating, "
        f"then nothing survived the {config.min_count}-core. "
        "Lower --min-count or --min-rating, or check --format."
    )

"""Sequence logic shared by the Beam pipeline and the single-process reference.

Pure functions on plain Python values: ordering a user's events, one round of
k-core filtering, id assignment, the leave-one-out split and the
`tf.train.Example` encoding. The Beam transforms in
`genni.pipeline.preprocess.beam` only decide where these run.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Container, Iterable, Mapping, Sequence

from genni.components import schema

# A user's events as (timestamp, item, rating); rating may be None.
RawEvent = tuple[float, str, "float | None"]


# Item ids follow the order of first appearance over users sorted by raw id:
# item i sorts before item j when its (raw user id, position) of first event is
# smaller. This is the numbering of the S3-Rec benchmark files, so a log built
# from them gets its original ids back.


def order_events(events: Iterable[RawEvent]) -> tuple[list[str], int]:
    """A user's items in time order, without exact duplicate events.

    An exact duplicate is the same item at the same timestamp with the same
    rating. Ties in timestamp are broken by raw item id (string order), so the
    order never depends on the input order or on how a runner groups records.

    Returns:
        (items oldest first, number of duplicate events dropped).
    """
    timed, duplicates = order_timed_events(events)
    return [item for _, item in timed], duplicates


def kcore_round(
    items: Sequence[str], item_counts: Mapping[str, int], min_count: int
) -> list[str] | None:
    """One simultaneous round of k-core filtering for one user.

    The user is dropped (None) when it has fewer than `min_count` events;
    otherwise the events of items with fewer than `min_count` events go.
    Repeating rounds until nothing changes gives the unique k-core, whatever the
    order in which users are visited.
    """
    if len(items) < min_count:
        return None
    return [item for item in items if item_counts[item] >= min_count]


def kcore_pass(
    users: Iterable[tuple[str, Sequence[str]]],
    item_counts: Mapping[str, int],
    min_count: int,
) -> tuple[list[tuple[str, list[str]]], collections.Counter]:
    """`kcore_round` over many users: (kept users, events removed per item)."""
    kept = []
    removed: collections.Counter = collections.Counter()
    for user, items in users:
        survivors = kcore_round(items, item_counts, min_count)
        if survivors is None:
            removed.update(items)
            continue
        if len(survivors) != len(items):
            removed.update(i for i in items if item_counts[i] < min_count)
        if survivors:
            kept.append((user, survivors))
    return kept, removed


def pad_left(ids: Sequence[int], max_len: int) -> list[int]:
    """The last `max_len` ids, left-padded with `PADDING_ID` to `max_len`."""
    ids = list(ids[-max_len:])
    return [schema.PADDING_ID] * (max_len - len(ids)) + ids


def next_item_example(item_ids: Sequence[int], max_len: int) -> dict:
    """The features of a sequence s_1..s_m read as every position t
    predicting s_{t+1}: the last target s_m, the history s_1..s_{m-1}."""
    inputs, targets = item_ids[:-1], item_ids[1:]
    return {
        schema.INPUT_IDS: pad_left(inputs, max_len),
        schema.TARGET_IDS: pad_left(targets, max_len),
        schema.TARGET: targets[-1],
        schema.HISTORY: list(inputs),
    }


def split_examples(
    item_ids: Sequence[int], max_len: int, held_out: frozenset | set = frozenset()
) -> dict[str, dict]:
    """Leave-one-out examples of one user, as feature dicts by split.

    For s_1..s_n: test predicts s_n from s_1..s_{n-1}, valid predicts s_{n-1}
    from s_1..s_{n-2}, and train uses s_1..s_{n-3} with every position t
    predicting s_{t+1}. A split whose input would be empty is left out.

    The train example's `user_items` (what `--exclude-seen` keeps the sampler
    off) are the items of the training prefix s_1..s_{n-2} only: the valid and
    test targets are held out, and a list holding them would tell training
    which items those are.

    `held_out`: item ids no training or validation example holds, in a
    history or as a target (`held_out_items`): the user's sequence is read
    without them, but for its last item, the test target.
    """
    if held_out:
        item_ids = [i for i in item_ids[:-1] if i not in held_out] + list(item_ids[-1:])
    n = len(item_ids)
    examples = {}
    for split, cut in ((schema.TRAIN, n - 2), (schema.VALID, n - 1), (schema.TEST, n)):
        if cut < 2:
            continue  # No input left for this split.
        features = next_item_example(item_ids[:cut], max_len)
        if split == schema.TRAIN:
            features[schema.USER_ITEMS] = sorted(set(item_ids[:cut]))
        examples[split] = features
    return examples


def held_out_items(items: Sequence[str], share: float, seed: int) -> frozenset[int]:
    """The ids (1-based, in `items`' order) of a seeded share of the items,
    held out of training and validation (`--hold-out-items`): as
    `../shared/tools/cold_baseline.py` draws them, the raw ids sorted (as
    numbers when every one is a number), then `random.Random(seed).sample`
    of int(share x items) of them."""
    import random

    numeric = all(item.isdigit() for item in items)
    order = sorted(items, key=int) if numeric else sorted(items)
    chosen = random.Random(seed).sample(order, int(len(order) * share))
    index = {item: n for n, item in enumerate(items, start=1)}
    return frozenset(index[item] for item in chosen)


def repeat_counts(item_ids: Sequence[object]) -> collections.Counter:
    """How often one user's sequence repeats itself, for `stats.json`.

    Counts `events`, `repeat_events` (an item the user had before), and for
    the valid (s_{n-1}) and test (s_n) targets, when the split has an example,
    `{split}_targets` and `{split}_repeat_targets` (the target is one of the
    items before it). Under the paper's protocol a repeated target can never
    be found: the items of the input history are not ranked.
    """
    counts: collections.Counter = collections.Counter()
    seen: set = set()
    repeats = []
    for item in item_ids:
        repeats.append(item in seen)
        seen.add(item)
    n = len(item_ids)
    counts["events"] = n
    counts["repeat_events"] = sum(repeats)
    for split, position in ((schema.VALID, n - 2), (schema.TEST, n - 1)):
        if position >= 1:  # As `split_examples`: the split has an input.
            counts[f"{split}_targets"] = 1
            counts[f"{split}_repeat_targets"] = int(repeats[position])
    return counts


# Counters of `repeat_counts` travel beside others under this prefix.
REPEAT_PREFIX = "repeats/"


def prefixed_repeat_counts(item_ids: Sequence[object]) -> dict[str, int]:
    """`repeat_counts` under `REPEAT_PREFIX`, to sum with other counters."""
    return {REPEAT_PREFIX + k: v for k, v in repeat_counts(item_ids).items()}


def repeat_stats(counts: Mapping[str, int]) -> dict:
    """`stats.json`'s `repeats` from summed counters (`prefixed_repeat_counts`)."""
    counts = {
        k.removeprefix(REPEAT_PREFIX): v
        for k, v in counts.items()
        if k.startswith(REPEAT_PREFIX)
    }

    def share(part: int, whole: int) -> float:
        return round(part / whole, 6) if whole else 0.0

    stats = {
        "events": int(counts.get("repeat_events", 0)),
        "event_share": share(counts.get("repeat_events", 0), counts.get("events", 0)),
    }
    for split in (schema.VALID, schema.TEST):
        repeats = int(counts.get(f"{split}_repeat_targets", 0))
        stats[f"{split}_targets"] = repeats
        stats[f"{split}_share"] = share(repeats, counts.get(f"{split}_targets", 0))
    return stats


def repeat_target_share(stats: Mapping) -> float:
    """The larger of the valid and test shares of repeated targets (0 if unknown)."""
    repeats = stats.get("repeats") or {}
    return max(repeats.get(f"{s}_share", 0.0) for s in (schema.VALID, schema.TEST))


def encode_example(user_id: int, features: Mapping[str, object]) -> bytes:
    """Serialize one split's features as a `tf.train.Example`."""
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example()
    feature = example.features.feature
    feature[schema.USER_ID].int64_list.value.append(user_id)
    for key, value in features.items():
        values = value if isinstance(value, list) else [value]
        feature[key].int64_list.value.extend(values)
    return example.SerializeToString()


def dataset_stats(num_users: int, num_items: int, num_events: int) -> dict:
    """The paper's dataset table: size, average length and sparsity."""
    cells = num_users * num_items
    return {
        "users": num_users,
        "items": num_items,
        "events": num_events,
        "avg_length": round(num_events / num_users, 4) if num_users else 0.0,
        "sparsity": round(1.0 - num_events / cells, 6) if cells else 1.0,
    }


def assemble_stats(
    *,
    config: Mapping[str, object],
    counters: Mapping[str, int],
    kcore: Mapping[str, int],
    final: Mapping[str, int],
    examples: Mapping[str, int],
    repeats: Mapping[str, int],
    item_attributes: Mapping[str, int] | None = None,
) -> dict:
    """`stats.json`, with the same keys from every implementation.

    `repeats`: `prefixed_repeat_counts` summed over the users.
    """
    stats = dict(config)
    stats.update({k: int(counters.get(k, 0)) for k in COUNTERS})
    stats["kcore"] = {k: int(kcore.get(k, 0)) for k in KCORE_KEYS}
    stats.update(dataset_stats(final["users"], final["items"], final["events"]))
    stats["examples"] = {s: int(examples.get(s, 0)) for s in schema.SPLITS}
    stats["repeats"] = repeat_stats(repeats)
    if item_attributes is not None:
        stats["item_attributes"] = dict(item_attributes)
    if "hold_out_items" in config:  # (Absent: nothing held out.)
        share = float(config["hold_out_items"])
        drawn_from = int(counters.get("kcore_items_kept") or final["items"])
        stats["hold_out"] = {
            "share": share,
            "seed": int(config["hold_out_seed"]),
            "drawn_from": drawn_from,  # The first items: those with events.
            "items": int(drawn_from * share),
            "test_targets": int(counters.get("held_out_test_targets", 0)),
        }
    stats["schema_version"] = schema.SCHEMA_VERSION
    return stats


def hold_out_counts(item_ids: Sequence[int], held_out: frozenset | set) -> dict:
    """A user's count of test targets among the held-out items."""
    if held_out and item_ids and item_ids[-1] in held_out:
        return {"held_out_test_targets": 1}
    return {}


# Counters of the reading stage, in stats.json.
COUNTERS = (
    "lines_read",
    "blank_lines",
    "malformed_lines",
    "events_read",
    "dropped_by_rating",
    "duplicate_events",
)
KCORE_KEYS = (
    "rounds",
    "users_removed",
    "items_removed",
    "events_removed",
    "items_before",
)


def attribute_stats(
    rekeyed: Mapping[str, Sequence[object]], num_items: int, malformed: int = 0
) -> dict:
    attributes = {str(a) for values in rekeyed.values() for a in values}
    return {
        "items_with_attributes": sum(1 for v in rekeyed.values() if v),
        "items_without_attributes": num_items - sum(1 for v in rekeyed.values() if v),
        "attributes": len(attributes),
        "malformed_metadata_lines": malformed,
    }


def rekey_attributes(
    raw_attributes: Mapping[str, Sequence[object]], items: Sequence[str]
) -> dict[str, list]:
    """Attributes keyed by new item id (1-based position in `items`)."""
    return {
        str(i): list(raw_attributes[item])
        for i, item in enumerate(items, start=1)
        if item in raw_attributes
    }


def pack_users(users: Iterable[tuple[str, Sequence[str]]]) -> str:
    """Users and their items as one compact text block.

    One line per user, `user<TAB>item item ...`: the `sequences.tsv` layout. Ids
    never hold white space (the parsers reject it), so the block is unambiguous,
    and a runner moves it between stages as a single string.
    """
    return "\n".join(f"{user}\t{' '.join(items)}" for user, items in users)


def unpack_users(block: str) -> list[tuple[str, list[str]]]:
    """Inverse of `pack_users`."""
    users = []
    for line in block.split("\n"):
        user, _, items = line.partition("\t")
        users.append((user, items.split()))
    return users


def extend_vocabulary(previous: Sequence[str], current: Iterable[str]) -> list[str]:
    """`previous` in its order, then the ids of `current` it lacks, in
    `current`'s order: every earlier index is kept, and the vocabulary only
    grows (`genni preprocess --previous`)."""
    known = set(previous)
    return [*previous, *(x for x in current if x not in known)]


# The split by time (`genni preprocess --split time`).
LEAVE_ONE_OUT = schema.LEAVE_ONE_OUT
TIME = schema.TIME_SPLIT
SPLIT_RULES = (LEAVE_ONE_OUT, TIME)
DAY_SECONDS = 86400.0
# A user's events as (timestamp, item), oldest first.
TimedItems = list[tuple[float, str]]


def order_timed_events(events: Iterable[RawEvent]) -> tuple[TimedItems, int]:
    """`order_events`, keeping each event's time: ((timestamp, item) oldest
    first, number of duplicate events dropped)."""
    events = list(events)
    unique = set(events)
    ordered = sorted(unique, key=lambda e: (e[0], e[1], e[2] is None, e[2] or 0.0))
    return [(t, item) for t, item, _ in ordered], len(events) - len(unique)


def time_cutoffs(
    last_time: float, test_days: float, valid_days: float
) -> tuple[float, float]:
    """(valid cutoff, test cutoff): the test window is the last `test_days`
    days of the log (events at or after the test cutoff), the validation
    window the `valid_days` before it. Calendar times over the whole log.

    Windows of 0 days end after the last event: with both at 0 every event
    is learned and the windows are empty (a refit's dataset, `genni pipeline`'s
    `export: {refit: true}`)."""
    end = math.nextafter(last_time, math.inf)
    test = last_time - test_days * DAY_SECONDS if test_days > 0 else end
    return (test - valid_days * DAY_SECONDS if valid_days > 0 else test), test


def training_items(timed: TimedItems, valid_cutoff: float) -> list[str]:
    """A user's items before the validation cutoff: all that training, the
    vocabulary, the k-core and every count may see."""
    return [item for t, item in timed if t < valid_cutoff]


def time_split_examples(
    timed: TimedItems,
    kept: Sequence[str] | None,
    item_ids: Mapping[str, int],
    cutoffs: tuple[float, float],
    max_len: int,
    met: Container[str] = (),
) -> tuple[dict[str, list[dict]], collections.Counter]:
    """One user's examples under the split by time, and their counts.

    Train: the user's training sequence after the k-core (`kept`, None when
    the k-core dropped the user), every position predicting the next; its
    `user_items` are the items of that sequence. Valid and test: every event
    of the user in the validation (test) window with an earlier event is a
    case: its history is all of the user's earlier events, in the
    vocabulary's ids (an item it does not know, new or removed by the
    k-core, is left out, as serving skips unknown items), its target the
    event's item, or 0 for an item the vocabulary does not know: a miss,
    counted as a new-item target; one of them that is in `met` (the items
    of the events before the validation cutoff) was removed by the k-core.
    """
    valid_cutoff, test_cutoff = cutoffs
    examples: dict[str, list[dict]] = {split: [] for split in schema.SPLITS}
    counts: collections.Counter = collections.Counter()
    if kept and len(kept) >= 2:
        ids = [item_ids[i] for i in kept]
        train = next_item_example(ids, max_len)
        examples[schema.TRAIN].append({**train, schema.USER_ITEMS: sorted(set(ids))})
    if kept:
        seen: set = set()
        for item in kept:
            counts[REPEAT_PREFIX + "repeat_events"] += item in seen
            seen.add(item)
        counts[REPEAT_PREFIX + "events"] += len(kept)
    for position, (t, item) in enumerate(timed):
        if t < valid_cutoff:
            continue
        split = schema.VALID if t < test_cutoff else schema.TEST
        earlier = [i for _, i in timed[:position]]
        if not earlier:
            counts[f"time/{split}_without_history"] += 1
            continue
        history = [item_ids[i] for i in earlier if i in item_ids]
        target = item_ids.get(item, schema.PADDING_ID)
        examples[split].append(
            {
                schema.INPUT_IDS: pad_left(history, max_len),
                schema.TARGET_IDS: pad_left([*history[1:], target], max_len),
                schema.TARGET: target,
                schema.HISTORY: history,
            }
        )
        counts[REPEAT_PREFIX + f"{split}_targets"] += 1
        counts[REPEAT_PREFIX + f"{split}_repeat_targets"] += item in earlier
        counts[f"time/{split}_new_targets"] += target == schema.PADDING_ID
        counts[f"time/{split}_kcore_removed_targets"] += (
            target == schema.PADDING_ID and item in met
        )
    return examples, counts


def time_stats(
    counts: Mapping[str, int],
    cutoffs,
    valid_days,
    test_days,
    span: tuple[float, float] | None = None,
    min_cases: int = 0,
) -> dict:
    """`stats.json`'s `time_split`: the cutoffs (UTC dates), the windows, the
    cases, the share of targets that are new items (misses), the scoreable
    cases (targets the vocabulary knows) and, with `span` (the log's first
    and last event times), the log's length in days; `min_cases`: the
    scoreable cases a window should hold (`PreprocessConfig.min_cases`)."""
    import datetime

    def date(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(
            timespec="seconds"
        )

    stats: dict = {
        "valid_cutoff": date(cutoffs[0]),
        "test_cutoff": date(cutoffs[1]),
        "valid_days": valid_days,
        "test_days": test_days,
        "min_cases": min_cases,
    }
    if span is not None:
        stats["first_event"], stats["last_event"] = date(span[0]), date(span[1])
        stats["log_days"] = round((span[1] - span[0]) / DAY_SECONDS, 4)
    for split in (schema.VALID, schema.TEST):
        cases = int(counts.get(REPEAT_PREFIX + f"{split}_targets", 0))
        new = int(counts.get(f"time/{split}_new_targets", 0))
        stats[f"{split}_cases"] = cases
        stats[f"{split}_new_item_targets"] = new
        stats[f"{split}_new_item_share"] = round(new / cases, 6) if cases else 0.0
        # Of those, the items the k-core removed (met before the cutoff).
        stats[f"{split}_kcore_removed_targets"] = int(
            counts.get(f"time/{split}_kcore_removed_targets", 0)
        )
        # A case whose target the vocabulary knows: one a model can hit.
        stats[f"{split}_scoreable_cases"] = cases - new
        stats[f"{split}_without_history"] = int(
            counts.get(f"time/{split}_without_history", 0)
        )
    return stats

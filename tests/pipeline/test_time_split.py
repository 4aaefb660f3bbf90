"""`genni preprocess --split time`: nothing at or after the validation cutoff
reaches what is learned or counted before it."""

import json

import pytest

from genni.components import schema
from genni.pipeline.cli import main as cli
from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training import data
from tests.conftest import review
from tests.pipeline.test_preprocess_e2e import read_split

DAY = 86400
USERS = [f"u{n}" for n in range(12)]
# Before the validation cutoff (day 20): item i1 is never followed by i2.
BEFORE = ["i0", "i3", "i1", "i4", "i2", "i5", "i6", "i7", "i8"]


def log_lines():
    lines = []
    for n, user in enumerate(USERS):
        items = BEFORE[n % 3 :] + BEFORE[: n % 3]
        items = [i for i in items if not (user == "u3" and i == "i8")]
        for day, item in enumerate(items):
            lines.append(review(user, item, day * DAY + n))
        # The validation window (days 20-25): a planted new item, and u3's
        # first i8.
        lines.append(review(user, "NEW", 21 * DAY + n))
        if user == "u3":
            lines.append(review(user, "i8", 22 * DAY))
        # The test window (days 25-30): the planted pair i1 -> i2, many times.
        lines.append(review(user, "i1", 26 * DAY + n))
        lines.append(review(user, "i2", 27 * DAY + n))
        # An item seen once before the cutoff and often after: the k-core
        # (min count 2) must count its one training event only.
        lines.append(review(user, "RARE", (5 if user == "u0" else 23) * DAY + n))
    # A user with one event before the cutoff and many after.
    lines.append(review("late", "i0", 10 * DAY))
    for day in (21, 22, 26, 28):
        lines.append(review("late", "i5", day * DAY))
    lines.append(review("u0", "i0", 30 * DAY))  # The log's last event.
    return lines


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """The split made by Beam (`genni preprocess`) and in memory."""
    root = tmp_path_factory.mktemp("time")
    path = root / "log.json"
    path.write_text("\n".join(log_lines()) + "\n")
    beam_out, mem_out = str(root / "beam"), str(root / "mem")
    flags = ["--split", "time", "--test-days", "5", "--min-count", "2"]
    args = ["preprocess", "--input", str(path), "--output", beam_out, *flags]
    assert cli.main([*args, "--max-len", "8"]) == 0
    config = PreprocessConfig(
        input=str(path),
        output=mem_out,
        min_count=2,
        max_len=8,
        split="time",
        test_days=5,
    )
    inmemory.run(config)
    return beam_out, mem_out


def items_of(data_dir):
    return (data_dir / schema.ITEMS_FILE).read_text().split()


def test_beam_and_in_memory_agree(split):
    beam_out, mem_out = split
    for name in (schema.ITEMS_FILE, schema.USERS_FILE, schema.SEQUENCES_FILE):
        with open(f"{beam_out}/{name}") as a, open(f"{mem_out}/{name}") as b:
            assert a.read() == b.read(), name
    for s in schema.SPLITS:
        assert read_split(beam_out, s, 8) == read_split(mem_out, s, 8), s
    with open(f"{beam_out}/stats.json") as a, open(f"{mem_out}/stats.json") as b:
        assert json.load(a) == json.load(b)


def test_nothing_after_the_cutoff_is_learned_or_counted(split, tmp_path):
    from pathlib import Path

    out = Path(split[0])
    items = items_of(out)
    ids = {item: i for i, item in enumerate(items, start=1)}
    # The vocabulary: no item seen only after the cutoff, and RARE (one event
    # before it) fell to the k-core although it has 12 after.
    assert "NEW" not in ids and "RARE" not in ids
    # Nor a user whose training events the k-core dropped: "late" is there,
    # after the kept users, for its evaluation cases only.
    users = (out / schema.USERS_FILE).read_text().split()
    assert users[-1] == "late" and "late" not in (
        line.split("\t")[0]
        for line in (out / schema.SEQUENCES_FILE).read_text().splitlines()
    )
    # Counts and the successor table come from the training sequences: i1 is
    # never followed by i2 there, though it is 12 times in the test window.
    counts = data.item_counts(str(out), 8, len(items))
    assert counts[ids["i1"]] == len(USERS)  # Once a user, before the cutoff.
    table = data.successor_table(str(out), 8, len(items), 3)
    assert ids["i2"] not in table[ids["i1"]] and ids["i4"] in table[ids["i1"]]
    # Exclusions: u3's training items hold no i8 (its first came after).
    u3 = users.index("u3") + 1
    (train,) = [r for r in read_split(str(out), schema.TRAIN, 8) if r["user_id"] == u3]
    assert ids["i8"] not in train[schema.USER_ITEMS]
    assert sorted(train[schema.USER_ITEMS]) == sorted(
        ids[i] for i in BEFORE if i != "i8"
    )


def test_every_event_of_the_windows_is_a_case_with_its_whole_history(split):
    from pathlib import Path

    out = Path(split[0])
    items = items_of(out)
    ids = {item: i for i, item in enumerate(items, start=1)}
    valid = read_split(str(out), schema.VALID, 8)
    test = read_split(str(out), schema.TEST, 8)
    # Valid: NEW for every user (a new item: target 0, a miss), u3's i8, the
    # RARE events of the window, late's two.
    assert sum(r[schema.TARGET] == 0 for r in valid) == len(USERS) + 11 + 0
    users = (out / schema.USERS_FILE).read_text().split()
    u3 = users.index("u3") + 1
    (i8,) = [r for r in valid if r["user_id"] == u3 and r[schema.TARGET] == ids["i8"]]
    # Its history: all of u3's earlier events that the vocabulary knows,
    # training and window alike (NEW is unknown: left out).
    assert len(i8[schema.HISTORY]) == len(BEFORE) - 1
    # Test: i1 then i2 for each user; i2's history ends with that i1.
    pairs = [r for r in test if r[schema.TARGET] == ids["i2"]]
    assert len(pairs) == len(USERS)
    assert all(r[schema.HISTORY][-1] == ids["i1"] for r in pairs)
    stats = json.loads((out / schema.STATS_FILE).read_text())
    split_stats = stats["time_split"]
    assert split_stats["valid_cutoff"].startswith("1970-01-21")
    assert split_stats["test_cutoff"].startswith("1970-01-26")
    assert split_stats["valid_cases"] == len(valid)
    assert split_stats["valid_new_item_targets"] == len(USERS) + 11
    assert stats["split"] == "time" and stats["examples"]["test"] == len(test)


def test_a_time_split_needs_times_and_windows(tmp_path):
    with pytest.raises(ValueError, match="--test-days"):
        PreprocessConfig(input="x", output="y", split="time")
    with pytest.raises(ValueError, match="need --split time"):
        PreprocessConfig(input="x", output="y", test_days=3)
    text = tmp_path / "seq.txt"
    text.write_text("u1 a b c\nu2 b c a d e\n")
    config = PreprocessConfig(
        input=str(text), output=str(tmp_path / "o"), split="time", test_days=1
    )
    with pytest.raises(ValueError, match="needs timestamps"):
        inmemory.run(config)


def test_a_time_split_dataset_is_keyed_by_its_cutoffs(split):
    from genni.pipeline.training import keys

    fingerprint = json.loads(keys.data_fingerprint(split[0]))
    assert fingerprint["time_split"][0].startswith("1970-01-21")

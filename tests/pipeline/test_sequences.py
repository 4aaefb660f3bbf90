import collections

import numpy as np
import pytest
import tensorflow as tf

from genni.components import schema
from genni.pipeline.preprocess import sequences


def test_order_events_sorts_by_time_then_item_and_drops_exact_duplicates():
    events = [(3.0, "c", 5.0), (1.0, "b", 4.0), (1.0, "a", 4.0), (3.0, "c", 5.0)]
    # The same item again at another time is a repeat, not a duplicate.
    events.append((5.0, "a", 4.0))
    items, duplicates = sequences.order_events(events)
    assert items == ["a", "b", "c", "a"]
    assert duplicates == 1


def test_order_events_is_independent_of_input_order():
    events = [(float(t % 3), f"i{t}", None) for t in range(20)]
    rng = np.random.default_rng(0)
    expected, _ = sequences.order_events(events)
    for _ in range(5):
        shuffled = [events[i] for i in rng.permutation(len(events))]
        assert sequences.order_events(shuffled)[0] == expected


def test_kcore_round():
    counts = {"a": 5, "b": 1, "c": 7}
    assert sequences.kcore_round(["a", "b"], counts, 3) is None  # too short
    assert sequences.kcore_round(["a", "b", "c", "a"], counts, 3) == ["a", "c", "a"]


def test_pad_left():
    assert sequences.pad_left([1, 2], 4) == [0, 0, 1, 2]
    assert sequences.pad_left([1, 2, 3, 4, 5], 3) == [3, 4, 5]


def test_split_examples_leave_one_out():
    # s = 1..6 with max_len 3.
    examples = sequences.split_examples([11, 12, 13, 14, 15, 16], max_len=3)
    train, valid, test = (examples[s] for s in schema.SPLITS)
    # Train: inputs s1..s3 predict s2..s4.
    assert train[schema.INPUT_IDS] == [11, 12, 13]
    assert train[schema.TARGET_IDS] == [12, 13, 14]
    assert train[schema.TARGET] == 14
    # The sampler's exclusions: the training prefix s1..s4, never the held-out
    # valid (s5) and test (s6) targets.
    assert train[schema.USER_ITEMS] == [11, 12, 13, 14]
    # Valid: inputs s1..s4 (last 3 kept) predict s5; the history is untruncated.
    assert valid[schema.INPUT_IDS] == [12, 13, 14]
    assert valid[schema.TARGET] == 15
    assert valid[schema.HISTORY] == [11, 12, 13, 14]
    # Test: inputs s1..s5 predict s6.
    assert test[schema.INPUT_IDS] == [13, 14, 15]
    assert test[schema.TARGET_IDS] == [14, 15, 16]
    assert test[schema.TARGET] == 16
    assert test[schema.HISTORY] == [11, 12, 13, 14, 15]
    assert schema.USER_ITEMS not in test


def test_split_examples_short_sequences_skip_empty_splits():
    assert set(sequences.split_examples([1, 2, 3], 5)) == {schema.VALID, schema.TEST}
    assert set(sequences.split_examples([1, 2], 5)) == {schema.TEST}
    assert sequences.split_examples([1], 5) == {}
    padded = sequences.split_examples([1, 2, 3, 4], 5)[schema.TRAIN]
    assert padded[schema.INPUT_IDS] == [0, 0, 0, 0, 1]
    assert padded[schema.TARGET_IDS] == [0, 0, 0, 0, 2]


def test_user_items_leave_out_held_out_items_even_when_they_repeat():
    # s = a b c b a: valid target b and test target a repeat earlier items, so
    # they are in the prefix anyway; a new item held out never is.
    train = sequences.split_examples([1, 2, 3, 2, 1], 5)[schema.TRAIN]
    assert train[schema.USER_ITEMS] == [1, 2, 3]
    train = sequences.split_examples([1, 2, 3, 4, 5, 6, 7], 5)[schema.TRAIN]
    assert 6 not in train[schema.USER_ITEMS] and 7 not in train[schema.USER_ITEMS]


def test_repeat_counts_and_stats():
    # a b a b a: events 3..5 repeat; valid target b (s4) and test target a (s5) too.
    counts = sequences.repeat_counts(["a", "b", "a", "b", "a"])
    assert counts["events"] == 5 and counts["repeat_events"] == 3
    assert counts["valid_targets"] == 1 and counts["valid_repeat_targets"] == 1
    assert counts["test_targets"] == 1 and counts["test_repeat_targets"] == 1
    # No repeats; a 2-item user has a test target only.
    fresh = sequences.repeat_counts(["a", "b"])
    assert fresh["repeat_events"] == 0 and fresh["test_repeat_targets"] == 0
    assert fresh["valid_targets"] == 0
    summed = collections.Counter(
        sequences.prefixed_repeat_counts(["a", "b", "a", "b", "a"])
    )
    summed.update(sequences.prefixed_repeat_counts(["a", "b", "c", "d"]))
    stats = sequences.repeat_stats(summed)
    assert stats == {
        "events": 3,
        "event_share": round(3 / 9, 6),
        "valid_targets": 1,
        "valid_share": 0.5,
        "test_targets": 1,
        "test_share": 0.5,
    }
    assert sequences.repeat_target_share({"repeats": stats}) == 0.5
    assert sequences.repeat_target_share({}) == 0.0


@pytest.mark.parametrize("split", schema.SPLITS)
def test_encode_example_parses_with_the_schema(split):
    features = sequences.split_examples([5, 6, 7, 8, 9], max_len=4)[split]
    serialized = sequences.encode_example(3, features)
    parsed = tf.io.parse_single_example(serialized, schema.feature_spec(4, split))
    assert int(parsed[schema.USER_ID]) == 3
    for key, value in features.items():
        np.testing.assert_array_equal(parsed[key].numpy(), value)


def test_dataset_stats_matches_the_paper_table_for_beauty():
    stats = sequences.dataset_stats(22363, 12101, 198502)
    assert stats["avg_length"] == pytest.approx(8.8764, abs=1e-4)
    assert 100 * stats["sparsity"] == pytest.approx(99.93, abs=0.01)


def test_rekey_attributes():
    rekeyed = sequences.rekey_attributes({"x": [1, 2], "z": [3]}, ["y", "x"])
    assert rekeyed == {"2": [1, 2]}
    assert sequences.attribute_stats(rekeyed, 2) == {
        "items_with_attributes": 1,
        "items_without_attributes": 1,
        "attributes": 2,
        "malformed_metadata_lines": 0,
    }

"""Each Beam transform of `genni preprocess`, in memory (TestPipeline + assert_that)."""

import collections
import gzip
import json
import os

import apache_beam as beam
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from genni.components import schema
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess import formats, inmemory, reading, sequences
from tests.conftest import review


def _users(batches):
    """Flatten packed batches into (user, items-tuple) pairs."""
    return batches | "Unbatch" >> beam.FlatMap(
        lambda batch: [(u, tuple(items)) for u, items in sequences.unpack_users(batch)]
    )


def test_read_logs_chunks_plain_and_gzip_files(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "READ_BLOCK_BYTES", 7)  # Lines span blocks.
    lines = [f"line number {i}" for i in range(11)]
    (tmp_path / "a.txt").write_text("\r\n".join(lines[:5]))  # CRLF, no final EOL
    with gzip.open(tmp_path / "b.txt.gz", "wt") as f:
        f.write("\n".join(lines[5:]) + "\n")
    with BeamTestPipeline() as p:
        chunks = p | preprocess.ReadLogs(str(tmp_path / "*"), chunk_lines=2)
        assert_that(
            chunks
            | beam.FlatMap(
                lambda c: [
                    (os.path.basename(c[0]), number, formats.decode(raw))
                    for number, raw in enumerate(c[2], start=c[1])
                ]
            ),
            equal_to(
                [("a.txt", n + 1, x) for n, x in enumerate(lines[:5])]
                + [("b.txt.gz", n + 1, x) for n, x in enumerate(lines[5:])]
            ),
        )
        assert_that(
            chunks
            | "Sizes" >> beam.Map(lambda c: len(c[2]) <= 2)
            | "All" >> beam.combiners.ToList()
            | beam.Map(all),
            equal_to([True]),
            label="ChunkSizes",
        )


def _summed(stats):
    return (
        stats
        | "SumStats" >> beam.CombinePerKey(sum)
        | "NonZero" >> beam.Filter(lambda kv: kv[1] != 0)
    )


def test_parse_reviews_routes_bad_lines_and_counts():
    lines = [
        (
            "f",
            1,
            [review("u1", "i1", 10, rating=5.0), review("u1", "i2", 11, rating=2.0)],
        ),
        ("f", 3, ["not json", "", json.dumps({"asin": "i1"})]),
    ]
    with BeamTestPipeline() as p:
        out = (
            p
            | beam.Create(lines)
            | preprocess.ParseReviews(formats.AMAZON, min_rating=3.0)
        )
        assert_that(out[preprocess.EVENTS], equal_to([("u1", (10.0, "i1", 5.0))]))
        reasons = out[preprocess.DEAD_LETTER] | beam.Map(
            lambda r: (json.loads(r)["line_number"], json.loads(r)["reason"][:8])
        )
        assert_that(
            reasons, equal_to([(3, "bad JSON"), (5, "missing ")]), label="DeadLetter"
        )
        assert_that(
            _summed(out[preprocess.STATS]),
            equal_to(
                [
                    ("lines_read", 5),
                    ("blank_lines", 1),
                    ("malformed_lines", 2),
                    ("events_read", 2),
                    ("dropped_by_rating", 1),
                ]
            ),
            label="Stats",
        )


def test_build_user_sequences_orders_and_deduplicates():
    events = [
        ("u1", (3.0, "c", 1.0)),
        ("u1", (1.0, "b", 1.0)),
        ("u1", (1.0, "a", 1.0)),
        ("u1", (1.0, "a", 1.0)),
        ("u2", (5.0, "x", None)),
    ]
    with BeamTestPipeline() as p:
        out = p | beam.Create(events) | preprocess.BuildUserSequences()
        assert_that(
            _users(out["batches"]),
            equal_to([("u1", ("a", "b", "c")), ("u2", ("x",))]),
        )
        assert_that(
            _summed(out[preprocess.STATS]),
            equal_to([("duplicate_events", 1), ("users_before_kcore", 2)]),
            label="Stats",
        )


def test_kcore_filter_cascades_over_rounds():
    # k = 2. Round 1 drops u4 (one event) and item c (one event), leaving u3
    # with [d] alone; round 2 drops u3; round 3 removes nothing.
    batch = [
        ("u1", ["a", "b"]),
        ("u2", ["a", "b"]),
        ("u3", ["c", "d"]),
        ("u4", ["d"]),
    ]
    with BeamTestPipeline() as p:
        out = (
            p
            | beam.Create([sequences.pack_users(batch)])
            | preprocess.KCoreFilter(2, max_rounds=4)
        )
        assert_that(
            _users(out["batches"]), equal_to([("u1", ("a", "b")), ("u2", ("a", "b"))])
        )
        assert_that(
            _summed(out[preprocess.STATS]),
            equal_to(
                [
                    ("kcore_items_before", 4),
                    ("kcore_removed_round_1", 2),
                    ("kcore_removed_round_2", 1),
                ]
            ),
            label="Stats",
        )


def test_kcore_filter_matches_the_in_memory_core_whatever_the_batching():
    users = {
        f"u{i}": [f"i{(i * j) % 11}" for j in range(1, 2 + i % 6)] for i in range(40)
    }
    expected, removed = inmemory.kcore(dict(users), min_count=3, max_rounds=10)
    assert 0 < len(expected) < len(users) and removed["rounds"] >= 1
    pairs = sorted(users.items())
    with BeamTestPipeline() as p:
        out = (
            p
            | beam.Create(
                [sequences.pack_users(pairs[i : i + 3]) for i in range(0, 40, 3)]
            )
            | preprocess.KCoreFilter(3, max_rounds=10)
        )
        assert_that(
            _users(out["batches"]),
            equal_to([(u, tuple(items)) for u, items in expected.items()]),
        )


def test_assign_ids_first_appearance_over_sorted_users():
    batches = [
        sequences.pack_users([("u2", ["z", "a"]), ("u1", ["b", "z"])]),
        sequences.pack_users([("u3", ["a", "c"])]),
    ]
    with BeamTestPipeline() as p:
        vocab = p | beam.Create(batches) | preprocess.AssignIds()
        assert_that(vocab["users"], equal_to([["u1", "u2", "u3"]]), label="Users")
        # u1 brings b, z; u2 brings a; u3 brings c.
        assert_that(vocab["items"], equal_to([["b", "z", "a", "c"]]), label="Items")


def test_encode_examples_by_split():
    users = ["u1", "u2"]
    items = ["a", "b", "c", "d"]
    batch = sequences.pack_users(
        [("u2", ["a", "b", "c", "d"]), ("u1", ["d", "c", "d"])]
    )

    def decode(serialized):
        parsed = tf.io.parse_single_example(
            serialized, schema.feature_spec(3, schema.TEST)
        )
        return int(parsed[schema.USER_ID]), int(parsed[schema.TARGET])

    with BeamTestPipeline() as p:
        out = (
            p
            | beam.Create([batch])
            | beam.ParDo(
                preprocess.EncodeExamplesFn(max_len=3),
                beam.pvalue.AsSingleton(p | "U" >> beam.Create([users])),
                beam.pvalue.AsSingleton(p | "I" >> beam.Create([items])),
            ).with_outputs(preprocess.STATS, *schema.SPLITS)
        )
        assert_that(
            out[schema.TEST] | "DecodeTest" >> beam.Map(decode),
            equal_to([(2, 4), (1, 4)]),
            label="Test",
        )
        assert_that(
            out[schema.TRAIN] | "DecodeTrain" >> beam.Map(decode),
            equal_to([(2, 2)]),  # u1 (3 items) has no training input.
            label="Train",
        )
        assert_that(
            _summed(out[preprocess.STATS]),
            equal_to(
                [
                    ("events", 7),
                    ("examples_train", 1),
                    ("examples_valid", 2),
                    ("examples_test", 2),
                    # u1's test target repeats its first item.
                    ("repeats/events", 7),
                    ("repeats/repeat_events", 1),
                    ("repeats/valid_targets", 2),
                    ("repeats/test_targets", 2),
                    ("repeats/test_repeat_targets", 1),
                ]
            ),
            label="Stats",
        )


def test_counter_and_min_combiners():
    with BeamTestPipeline() as p:
        counts = (
            p
            | "C" >> beam.Create([collections.Counter(a=1, b=2), {"a": 3}])
            | "Sum" >> beam.CombineGlobally(preprocess.CounterSumFn())
        )
        assert_that(counts, equal_to([{"a": 4, "b": 2}]), label="Sum")
        mins = (
            p
            | "M" >> beam.Create([{"a": (2, 0)}, {"a": (1, 5), "b": (9, 9)}])
            | "Min" >> beam.CombineGlobally(preprocess.MinPerKeyFn())
        )
        assert_that(mins, equal_to([{"a": (1, 5), "b": (9, 9)}]), label="Min")

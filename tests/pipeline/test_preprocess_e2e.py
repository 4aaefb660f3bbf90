"""`genni preprocess` end to end on small generated logs, and its error paths."""

import glob
import json
import os

import pytest
import tensorflow as tf

from genni.components import schema
from genni.pipeline.cli import main as cli
from genni.pipeline.preprocess import inmemory, outputs, synthetic
from genni.pipeline.preprocess.catalog import read_catalog
from genni.pipeline.preprocess.config import PreprocessConfig
from tests.conftest import review

SMALL = synthetic.SyntheticConfig(num_users=120, num_items=40, noise_users=5, seed=3)


def read_split(data_dir, split, max_len):
    files = sorted(glob.glob(schema.split_pattern(data_dir, split)))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
    spec = schema.feature_spec(max_len, split)
    rows = []
    for serialized in dataset:
        parsed = tf.io.parse_single_example(serialized, spec)
        rows.append({k: v.numpy().tolist() for k, v in parsed.items()})
    return sorted(rows, key=lambda r: r[schema.USER_ID])


def preprocess(log, out, *flags):
    """`genni preprocess --input log --output out` with `flags`: its exit code."""
    return cli.main(["preprocess", "--input", str(log), "--output", str(out), *flags])


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """One Beam run and one in-memory run over the same synthetic log."""
    root = tmp_path_factory.mktemp("e2e")
    log = str(root / "logs" / "reviews.json.gz")
    synthetic.write_log(SMALL, log)
    beam_out, mem_out = str(root / "beam"), str(root / "mem")
    assert preprocess(root / "logs" / "*.gz", beam_out, "--max-len", "8") == 0
    inmemory.run(PreprocessConfig(input=log, output=mem_out, max_len=8))
    return beam_out, mem_out


def test_outputs_are_complete(synthetic_run):
    beam_out, _ = synthetic_run
    names = set(os.listdir(beam_out))
    for expected in (
        schema.ITEMS_FILE,
        schema.USERS_FILE,
        schema.SEQUENCES_FILE,
        schema.STATS_FILE,
        schema.DEAD_LETTER_DIR,
    ):
        assert expected in names
    for split in schema.SPLITS:
        assert glob.glob(schema.split_pattern(beam_out, split))
    # Nothing of the staging directory is left beside the output.
    assert [p for p in os.listdir(os.path.dirname(beam_out)) if "staging" in p] == []


def test_beam_equals_the_in_memory_implementation(synthetic_run):
    beam_out, mem_out = synthetic_run
    for name in (
        schema.ITEMS_FILE,
        schema.USERS_FILE,
        schema.SEQUENCES_FILE,
        schema.STATS_FILE,
    ):
        assert read_lines(os.path.join(beam_out, name)) == read_lines(
            os.path.join(mem_out, name)
        ), name
    for split in schema.SPLITS:
        assert read_split(beam_out, split, 8) == read_split(mem_out, split, 8)


def test_stats_and_dead_letter(synthetic_run):
    beam_out, _ = synthetic_run
    stats = outputs.read_json(os.path.join(beam_out, schema.STATS_FILE))
    log_lines = synthetic.generate_log(SMALL)
    assert stats["lines_read"] == len(log_lines)
    assert stats["malformed_lines"] > 0
    assert stats["duplicate_events"] > 0
    assert stats["kcore"]["users_removed"] >= SMALL.noise_users
    assert stats["kcore"]["rounds"] >= 1
    assert stats["users"] == len(read_lines(os.path.join(beam_out, schema.USERS_FILE)))
    assert stats["items"] == len(read_lines(os.path.join(beam_out, schema.ITEMS_FILE)))
    assert stats["examples"][schema.TEST] == stats["users"]
    # The repeats of the final sequences, counted from sequences.tsv.
    users = [
        line.split("\t")[1].split()
        for line in read_lines(os.path.join(beam_out, schema.SEQUENCES_FILE))
    ]
    test_repeats = sum(seq[-1] in seq[:-1] for seq in users)
    event_repeats = sum(seq[i] in seq[:i] for seq in users for i in range(len(seq)))
    assert stats["repeats"]["test_targets"] == test_repeats
    assert stats["repeats"]["events"] == event_repeats
    assert stats["repeats"]["event_share"] == round(event_repeats / stats["events"], 6)
    dead = [
        json.loads(line)
        for path in glob.glob(os.path.join(beam_out, schema.DEAD_LETTER_DIR, "*"))
        for line in read_lines(path)
    ]
    assert len(dead) == stats["malformed_lines"]
    assert {d["reason"].split(":")[0] for d in dead} == {"bad JSON", "missing field"}
    assert all(d["file"].endswith("reviews.json.gz") for d in dead)


def test_examples_follow_the_sequences(synthetic_run):
    beam_out, _ = synthetic_run
    items = read_lines(os.path.join(beam_out, schema.ITEMS_FILE))
    item_id = {raw: i for i, raw in enumerate(items, start=1)}
    sequences = [
        [item_id[i] for i in line.split("\t")[1].split()]
        for line in read_lines(os.path.join(beam_out, schema.SEQUENCES_FILE))
    ]
    test = read_split(beam_out, schema.TEST, 8)
    valid = read_split(beam_out, schema.VALID, 8)
    for seq, t, v in zip(sequences, test, valid, strict=True):
        assert t[schema.TARGET] == seq[-1] and v[schema.TARGET] == seq[-2]
        assert t[schema.HISTORY] == seq[:-1]
        assert t[schema.INPUT_IDS] == ([0] * 8 + seq[:-1])[-8:]
    # Item ids cover 1..num_items, 0 stays padding.
    assert {i for s in sequences for i in s} == set(range(1, len(items) + 1))


def test_sequence_format_round_trip(tmp_path, synthetic_run):
    """The sequences text of a run, read back as the S3-Rec format, is unchanged."""
    beam_out, _ = synthetic_run
    text = tmp_path / "seq.txt"
    text.write_text(
        "\n".join(
            line.replace("\t", " ")
            for line in read_lines(os.path.join(beam_out, schema.SEQUENCES_FILE))
        )
    )
    out = str(tmp_path / "again")
    assert preprocess(text, out) == 0
    assert read_lines(os.path.join(out, schema.SEQUENCES_FILE)) == read_lines(
        os.path.join(beam_out, schema.SEQUENCES_FILE)
    )
    assert read_lines(os.path.join(out, schema.ITEMS_FILE)) == read_lines(
        os.path.join(beam_out, schema.ITEMS_FILE)
    )
    assert (
        outputs.read_json(os.path.join(out, schema.STATS_FILE))["format"] == "sequences"
    )


def test_min_rating_and_item_attributes(tmp_path, write_log):
    lines = [
        review(f"u{u}", f"i{i}", u * 100 + i, rating=1.0 + (i % 5))
        for u in range(6)
        for i in range(6)
    ]
    log = write_log(lines)
    attributes = tmp_path / "attrs.json"
    attributes.write_text(json.dumps({"i4": [7, 8], "i3": [8], "gone": [1]}))
    out = str(tmp_path / "out")
    flags = ["--min-count", "2", "--min-rating", "3"]
    code = preprocess(log, out, *flags, "--item-attributes", str(attributes))
    assert code == 0
    stats = outputs.read_json(os.path.join(out, schema.STATS_FILE))
    # Ratings are 1..5 over i0..i4 and again 1 for i5: only 4 and 5 are > 3.
    assert stats["dropped_by_rating"] == 6 * 4
    # The items file is the catalog: "gone", listed with no kept event, is
    # in the vocabulary after the log's items, servable by its attributes.
    assert read_lines(os.path.join(out, schema.ITEMS_FILE)) == ["i3", "i4", "gone"]
    assert outputs.read_json(os.path.join(out, schema.ITEM_ATTRIBUTES_FILE)) == {
        "1": [8],
        "2": [7, 8],
        "3": [1],
    }
    assert stats["items"] == 3
    assert stats["item_attributes"]["items_with_attributes"] == 3
    assert stats["item_attributes"]["catalog_items_without_events"] == 1


def test_missing_input(tmp_path, capsys):
    code = preprocess(tmp_path / "nope*.gz", tmp_path / "out")
    assert code == cli.EXIT_USAGE
    assert "No input files match" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_empty_after_filtering_writes_nothing(tmp_path, write_log, capsys):
    log = write_log([review("u1", "i1", 1), review("u2", "i2", 2)])
    out = tmp_path / "out"
    code = preprocess(log, out)
    assert code == cli.EXIT_USAGE
    assert "No user is left after filtering" in capsys.readouterr().err
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if "staging" in p] == []


def test_unknown_format(tmp_path, write_log, capsys):
    log = write_log(["<xml/>"], name="weird.txt")
    code = preprocess(log, tmp_path / "o")
    assert code == cli.EXIT_USAGE
    assert "pass --format" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["preprocess", "--input", log, "--output", "o", "--format", "xml"])
    assert info.value.code == 2


def test_output_not_empty_needs_overwrite(tmp_path, write_log, capsys):
    lines = [review(f"u{u}", f"i{i}", i) for u in range(3) for i in range(3)]
    log = write_log(lines)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    args = ["preprocess", "--input", log, "--output", str(out), "--min-count", "2"]
    assert cli.main(args) == cli.EXIT_USAGE
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "precious"
    assert cli.main([*args, "--overwrite"]) == 0
    assert not (out / "keep.txt").exists()
    assert (out / schema.STATS_FILE).exists()


def test_failure_midway_leaves_the_old_output(tmp_path, write_log, capsys):
    lines = [review(f"u{u}", f"i{i}", i) for u in range(3) for i in range(3)]
    log = write_log(lines)
    out = tmp_path / "out"
    base = ["preprocess", "--input", log, "--output", str(out), "--min-count", "2"]
    assert cli.main(base) == 0
    before = sorted(os.listdir(out))
    bad = tmp_path / "attrs.json"
    bad.write_text("[1, 2]")  # Fails inside the pipeline, after the TFRecords.
    code = cli.main([*base, "--overwrite", "--item-attributes", str(bad)])
    assert code == cli.EXIT_USAGE
    assert "neither an S3-Rec item2attributes.json" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == before
    assert [p for p in os.listdir(tmp_path) if "staging" in p] == []


def test_kcore_that_does_not_converge_is_an_error(tmp_path, write_log, capsys):
    # A chain that peels one user per round: u_k needs u_{k+1}'s items.
    lines = []
    for u in range(6):
        lines += [review(f"u{u}", f"i{u}", 1), review(f"u{u}", f"i{u + 1}", 2)]
    log = write_log(lines)
    code = preprocess(
        log, tmp_path / "o", "--min-count", "2", "--max-kcore-rounds", "1"
    )
    assert code == cli.EXIT_USAGE
    assert "did not converge" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_item_attributes_from_amazon_and_yelp_metadata(tmp_path, write_log):
    lines = [review(f"u{u}", f"i{i}", u * 100 + i) for u in range(5) for i in range(4)]
    log = write_log(lines)
    metadata = [
        # Amazon 2014: Python literals, categories as paths.
        "{'asin': 'i0', 'brand': 'Acme', "
        "'categories': [['Toys', 'Puzzles'], ['Toys']]}",
        # Amazon 2018: JSON, `category`.
        json.dumps({"asin": "i1", "brand": "Zed", "category": ["Toys", "Games"]}),
        # Amazon 2023: `parent_asin`, `store`.
        json.dumps({"parent_asin": "i2", "store": "Acme", "categories": ["Dolls"]}),
        "{not a record",
        json.dumps({"title": "no id"}),
        json.dumps({"asin": "elsewhere", "brand": "Gone"}),
    ]
    meta = write_log(metadata, name="meta.json.gz")
    out = str(tmp_path / "out")
    code = preprocess(log, out, "--min-count", "2", "--item-attributes", meta)
    assert code == 0
    written = outputs.read_json(os.path.join(out, schema.ITEM_ATTRIBUTES_FILE))
    items = read_lines(os.path.join(out, schema.ITEMS_FILE))
    by_raw = {items[int(k) - 1]: v for k, v in written.items()}
    assert by_raw == {
        "i0": ["brand:Acme", "category:Toys", "category:Puzzles"],
        "i1": ["brand:Zed", "category:Toys", "category:Games"],
        "i2": ["brand:Acme", "category:Dolls"],
        "elsewhere": ["brand:Gone"],  # Listed, no events: in the catalog.
    }
    stats = outputs.read_json(os.path.join(out, schema.STATS_FILE))
    assert stats["item_attributes"]["malformed_metadata_lines"] == 2
    assert stats["item_attributes"]["items_without_attributes"] == 1  # i3
    assert "2 unreadable metadata lines" in cli.format_stats(stats)
    # The unreadable lines are dead letters; the file and the vocabulary meet
    # with none dropped unsaid: "elsewhere" has no events, i3 no line.
    assert items[-1] == "elsewhere" and stats["items"] == 5
    dead = read_lines(os.path.join(out, "dead_letter", "items-00000-of-00001.jsonl"))
    assert [json.loads(d)["line"] for d in dead] == metadata[3:5]
    assert {
        k: stats["item_attributes"][k]
        for k in (
            "catalog_items",
            "catalog_items_without_events",
            "items_not_in_catalog",
        )
    } == {
        "catalog_items": 4,
        "catalog_items_without_events": 1,
        "items_not_in_catalog": 1,
    }
    assert "4 items listed: 1 of them without a kept event" in cli.format_stats(stats)

    yelp = tmp_path / "business.json"
    yelp.write_text(
        json.dumps({"business_id": "b1", "categories": "Pizza, Restaurants"})
        + "\n"
        + json.dumps({"business_id": "b2", "categories": None})
        + "\n"
    )
    catalog = read_catalog(str(yelp))
    assert (catalog.items, len(catalog.malformed)) == (
        {"b1": ["category:Pizza", "category:Restaurants"], "b2": []},
        0,
    )
    empty = tmp_path / "empty.json"
    empty.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="neither an S3-Rec"):
        read_catalog(str(empty))

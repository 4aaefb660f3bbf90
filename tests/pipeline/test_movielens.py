"""MovieLens logs as they come: ratings.csv (header), ratings.dat (::),
u.data (tab-separated, no header) and RecBole's .inter (typed header), read
and preprocessed as events."""

import json

import pytest

from genni.components import schema
from genni.pipeline.preprocess import formats, inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.preprocess.formats import Event

# Three users, four movies; user 1's events out of time order in the file.
ROWS = [
    ("1", "10", "4.0", "300"),
    ("1", "11", "3.5", "100"),
    ("1", "12", "5.0", "200"),
    ("2", "10", "2.0", "50"),
    ("2", "13", "4.0", "60"),
    ("3", "11", "1.0", "70"),
    ("3", "13", "3.0", "80"),
    ("3", "12", "4.5", "90"),
]


def ratings_csv(rows=ROWS):
    return ["userId,movieId,rating,timestamp"] + [",".join(r) for r in rows]


def ratings_dat(rows=ROWS):
    return ["::".join(r) for r in rows]


def u_data(rows=ROWS):
    return ["\t".join(r) for r in rows]


def inter(rows=ROWS):
    # Columns in RecBole's usual order, and a column genni does not read.
    header = "user_id:token\titem_id:token\trating:float\ttimestamp:float\tx:token"
    return [header] + ["\t".join([*r, "z"]) for r in rows]


@pytest.mark.parametrize(
    ("lines", "fmt"),
    [
        (ratings_csv(), formats.MOVIELENS),
        (ratings_dat(), formats.MOVIELENS_DAT),
        (u_data(), formats.TSV),
        (inter(), formats.RECBOLE),
    ],
)
def test_each_is_detected_by_its_first_line_and_read_as_events(lines, fmt):
    assert formats.resolve_format(formats.AUTO, iter(lines)) == fmt
    header = lines[0]
    events = [e for line in lines for e in formats.parse_line(line, fmt, header)]
    assert events[0] == Event("1", "10", 300.0, 4.0)
    assert len(events) == len(ROWS)  # A header is no event, and no error.


def test_a_recbole_header_names_its_columns_in_any_order():
    header = "timestamp:float\titem_id:token\tuser_id:token"  # No rating.
    (event,) = formats.parse_line("7\tm1\tu1", formats.RECBOLE, header)
    assert event == Event("u1", "m1", 7.0, None)
    with pytest.raises(formats.MalformedRecord, match="3 fields"):
        formats.parse_line("7\tm1", formats.RECBOLE, header)
    with pytest.raises(ValueError, match="lacks timestamp"):
        formats.parser_for(formats.RECBOLE, "user_id:token\titem_id:token")


def test_a_movielens_dat_line_needs_four_fields():
    with pytest.raises(formats.MalformedRecord, match="4 fields"):
        formats.parse_line("1::2::3", formats.MOVIELENS_DAT)


@pytest.mark.parametrize(
    ("name", "lines"),
    [
        ("ratings.csv", ratings_csv()),
        ("ratings.dat", ratings_dat()),
        ("u.data", u_data()),
        ("u.inter", inter()),
    ],
)
def test_preprocess_reads_them_as_users_items_and_times(
    write_log, tmp_path, name, lines
):
    path = write_log(lines, name)
    out = tmp_path / "data"
    stats = inmemory.run(PreprocessConfig(input=path, output=str(out), min_count=1))
    assert stats["format"] in (
        formats.MOVIELENS,
        formats.MOVIELENS_DAT,
        formats.TSV,
        formats.RECBOLE,
    )
    assert (stats["events_read"], stats["malformed_lines"]) == (len(ROWS), 0)
    assert (stats["users"], stats["items"]) == (3, 4)
    sequences = dict(
        line.split("\t")
        for line in (out / schema.SEQUENCES_FILE).read_text().splitlines()
    )
    assert sequences["1"] == "11 12 10"  # In time order, not file order.
    dead = (out / schema.DEAD_LETTER_DIR).glob("*.jsonl")
    assert all(not p.read_text().strip() for p in dead)  # The header is no error.
    assert json.loads((out / schema.STATS_FILE).read_text())["events"] == len(ROWS)


def test_genni_preprocess_reads_an_inter_file_with_beam(write_log, tmp_path):
    """The Beam pipeline gets the header too, and writes what the in-memory
    reference writes."""
    from genni.pipeline.cli import main as cli

    path = write_log(inter(), "ml.inter")
    beam_out, mem_out = tmp_path / "beam", tmp_path / "mem"
    args = ["preprocess", "--input", path, "--output", str(beam_out)]
    assert cli.main([*args, "--min-count", "1"]) == 0
    inmemory.run(PreprocessConfig(input=path, output=str(mem_out), min_count=1))
    for name in (schema.SEQUENCES_FILE, schema.ITEMS_FILE, schema.USERS_FILE):
        assert (beam_out / name).read_text() == (mem_out / name).read_text()
    stats = json.loads((beam_out / schema.STATS_FILE).read_text())
    assert (stats["format"], stats["events_read"]) == (formats.RECBOLE, len(ROWS))

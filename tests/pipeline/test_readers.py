"""The log readers never guess and never lose a line silently (issue 46): a
line that is not UTF-8 goes to the dead letter with its file and number, a
user on several lines of a sequences file is joined in file order, a
truncated compressed file is an error naming it, a table is never read as
sequences; and, for random bytes, every line is read or counted."""

import bz2
import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genni.pipeline.cli import main as cli
from genni.pipeline.preprocess import beam, formats, inmemory, outputs
from genni.pipeline.preprocess.config import PreprocessConfig
from tests.conftest import review


def _preprocess(tmp_path, log, *flags):
    out = tmp_path / "data"
    args = ["preprocess", "--input", str(log), "--output", str(out), *flags]
    return cli.main([*args, "--min-count", "1"]), out


def test_a_line_that_is_not_utf8_is_set_aside_with_its_file_and_number(tmp_path):
    log = tmp_path / "log.json"
    good = [review("u1", f"i{n}", n) for n in range(4)]
    log.write_bytes(
        "\n".join(good[:2]).encode()
        + b'\n{"reviewerID": "\xff"}\n'
        + "\n".join(good[2:]).encode()
    )
    code, out = _preprocess(tmp_path, log)
    assert code == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["events"] == 4 and stats["malformed_lines"] == 1
    (dead,) = [
        json.loads(line)
        for f in (out / "dead_letter").iterdir()
        for line in f.read_text().splitlines()
    ]
    assert dead["file"].endswith("log.json") and dead["line_number"] == 3
    assert dead["reason"].startswith("not UTF-8") and "\\xff" in dead["line"]


@pytest.mark.parametrize("fmt", ["sequences", "auto"])
def test_a_user_on_several_lines_is_joined_in_file_order(tmp_path, fmt):
    log = tmp_path / "seq.txt"
    log.write_text("u1 z y x w v\nu2 a b c d e f\nu1 k j\nu3 a c e b d\n")
    code, out = _preprocess(tmp_path, log, "--format", fmt)
    assert code == 0
    rows = dict(
        line.split("\t") for line in (out / "sequences.tsv").read_text().splitlines()
    )
    assert rows["u1"] == "z y x w v k j"


def test_a_truncated_compressed_file_is_an_error_naming_it(tmp_path, capsys):
    log = tmp_path / "log.json.gz"
    text = "\n".join(review(f"u{n % 9}", f"i{n % 13}", n) for n in range(3000))
    log.write_bytes(gzip.compress(text.encode())[:4000])
    code, out = _preprocess(tmp_path, log)
    assert code == 2
    err = capsys.readouterr().err
    assert "log.json.gz" in err and "truncated or corrupt" in err
    assert not out.exists()
    with pytest.raises(ValueError, match=r"log\.json\.gz to its end"):
        list(outputs.iter_raw_lines(str(log)))


COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress}


def _beam_lines(tmp_path, suffix, data):
    """The chunks Beam's reading DoFn yields for a file holding `data`, run
    without a pipeline."""
    from apache_beam.io import fileio
    from apache_beam.io.filesystem import FileMetadata

    from genni.pipeline.preprocess import reading

    path = tmp_path / f"dofn.inter.{suffix}"
    path.write_bytes(data)
    readable = fileio.ReadableFile(FileMetadata(str(path), len(data)))
    return reading.ReadLineChunksFn().process(readable)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_compressed_log_cut_anywhere_is_an_error_on_every_path(tmp_path, suffix):
    """Issue 52: 3,000 short lines, the file cut at a quarter, half,
    three quarters of its bytes and one byte short. Beam's reader (preprocess,
    batch-recommend), the in-memory reader and `genni replay`'s reader all
    refuse it, naming the file; before, Beam's read the half it had."""
    from genni.pipeline.loop import cases

    head = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
    text = head + "\n".join(f"u{n % 97}\ti{n % 13}\t5\t{n}" for n in range(3000))
    whole = COMPRESS[suffix](text.encode())
    for cut in (len(whole) // 4, len(whole) // 2, 3 * len(whole) // 4, len(whole) - 1):
        log = tmp_path / f"cut{cut}.inter.{suffix}"
        log.write_bytes(whole[:cut])
        config = PreprocessConfig(
            input=str(log),
            output=str(tmp_path / f"data{cut}"),
            format="recbole",
            min_count=1,
        )
        named = rf"{log.name} to its end"
        if cut == len(whole) // 2:  # The case, through Beam (slower).
            with pytest.raises(ValueError, match=named):
                beam.preprocess(config)
            assert not Path(config.output).exists()
        with pytest.raises(ValueError, match=named):
            inmemory.run(config)
        with pytest.raises(ValueError, match=named):
            cases.read_log(str(log))
        with pytest.raises(ValueError, match=named):  # batch-recommend's check.
            list(outputs.iter_lines(str(log)))
    # Beam's reader meets every cut through the same `outputs.open_log`.
    for cut in (len(whole) // 4, 3 * len(whole) // 4, len(whole) - 1):
        with pytest.raises(ValueError, match="to its end"):
            list(_beam_lines(tmp_path, suffix, whole[:cut]))
    # The whole file reads, by every reader, to its last line.
    log = tmp_path / f"whole.inter.{suffix}"
    log.write_bytes(whole)
    assert sum(1 for _ in outputs.iter_raw_lines(str(log))) == 3001
    stats = beam.preprocess(
        PreprocessConfig(
            input=str(log),
            output=str(tmp_path / "whole"),
            format="recbole",
            min_count=1,
        )
    )
    assert stats["events_read"] == 3000
    assert sum(len(events) for events in cases.read_log(str(log))[2].values()) == 3000


@pytest.mark.parametrize(
    "lines",
    [
        ["196\t242\tx\t881250949", "186\t302\t3\t8917x17742"],  # No rating, time
        ["1 2 5 881250949", "1 3 4 881250950", "2 2 1 881250951"],
        ["user_id:token\titem_id:token\n"[:-1] + "x", "1\t2"],
    ],
)
def test_a_table_is_never_guessed_as_sequences(lines):
    with pytest.raises(ValueError, match=r"looks like a table|Cannot tell"):
        formats.resolve_format(formats.AUTO, iter(lines))


def test_sequences_of_varying_lengths_are_still_detected():
    lines = ["1 1 2 3 4 5", "2 6 7 8 9 10 11 12", "3 2 4 6 8 10"]
    assert formats.resolve_format(formats.AUTO, iter(lines)) == formats.SEQUENCES


GOOD = st.builds(
    review,
    st.sampled_from(["u1", "u2", "u3"]),
    st.sampled_from(["a", "b", "c", "d"]),
    st.integers(0, 10**9),
)
LINES = st.lists(
    st.one_of(
        GOOD.map(str.encode),
        GOOD.flatmap(lambda r: st.integers(0, len(r)).map(lambda n: r[:n].encode())),
        st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
        st.just(b""),
    ),
    max_size=12,
)


def _read_in_memory(path):
    config = PreprocessConfig(str(path), str(path) + "_out", format=formats.AMAZON)
    by_user, _, counts = inmemory.read_events(config, formats.AMAZON)
    return sorted((u, e[0], e[1]) for u, es in by_user.items() for e in es), counts


def _read_with_beams_dofn(path):
    fn = beam.ParseReviewFn(formats.AMAZON, None)
    fn.setup()
    fn.start_bundle()
    chunks = [(str(path), 1, [raw for _, _, raw in outputs.iter_raw_lines(str(path))])]
    events = []
    for chunk in chunks:
        for out in fn.process(chunk):
            if isinstance(out, tuple):
                events.append((out[0], out[1][0], out[1][1]))
    # finish_bundle's counts: tagged, windowed (key, count) pairs.
    counts = dict(out.value.value for out in fn.finish_bundle())
    return sorted(events), counts


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(lines=LINES)
def test_random_lines_are_read_or_counted_never_a_traceback(lines):
    """Random bytes, truncated records and good ones: every line is read
    (its events kept) or counted (blank or malformed); Beam's DoFn and the
    in-memory reader agree line for line."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.json"
        path.write_bytes(b"\n".join(lines) + (b"\n" if lines else b""))
        expected = []
        good_lines = 0
        for raw in lines:
            try:
                text = formats.decode(raw)
                found = list(formats.parse_amazon(text)) if text.strip() else []
            except formats.MalformedRecord:
                continue
            good_lines += bool(found)
            expected += [(e.user, e.timestamp, e.item) for e in found]
        for read in (_read_in_memory, _read_with_beams_dofn):
            events, counts = read(path)
            assert events == sorted(expected)
            assert counts.get("lines_read", 0) == len(lines)
            assert counts.get("blank_lines", 0) + counts.get(
                "malformed_lines", 0
            ) + good_lines == len(lines)


def test_garbage_bytes_are_an_error_naming_the_file(tmp_path, capsys):
    log = tmp_path / "garbage.bin"
    log.write_bytes(bytes(range(128, 256)) * 3)
    code, out = _preprocess(tmp_path, log)
    assert code == 2
    err = capsys.readouterr().err
    assert "garbage.bin" in err and "not UTF-8 text" in err
    assert not out.exists()

"""Writing a dataset directory: staging, single files, and the final move.

A run writes into a hidden staging directory beside the output and moves it into
place only when everything is written, so a failed or killed run never leaves a
half-written dataset where a later stage would read it. Paths go through Beam's
`FileSystems`, so the same code writes locally and to any filesystem Beam knows.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import os
import shutil
import uuid
import zlib
from collections.abc import Iterable

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from genni.pipeline import atomic
from genni.pipeline.beam_options import job_failure


class OutputExistsError(FileExistsError):
    """The output directory holds files and --overwrite was not given."""


def _is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) in (None, "file")


def has_files(directory: str) -> bool:
    if _is_local(directory):
        return os.path.isdir(directory) and bool(os.listdir(directory))
    return bool(FileSystems.match([directory.rstrip("/") + "/**"])[0].metadata_list)


def staging_dir(output: str) -> str:
    """A fresh sibling of `output` to write into before the final move."""
    parent, name = os.path.split(output.rstrip("/"))
    return FileSystems.join(parent or ".", f".{name}.staging-{uuid.uuid4().hex[:8]}")


def check_output(output: str, overwrite: bool) -> None:
    if has_files(output) and not overwrite:
        raise OutputExistsError(
            f"Output directory {output!r} is not empty; pass --overwrite to replace "
            "it or choose another --output."
        )


def remove_tree(path: str) -> None:
    if _is_local(path):
        shutil.rmtree(path, ignore_errors=True)
    elif FileSystems.exists(path):
        FileSystems.delete([path])


@contextlib.contextmanager
def job_staging(staging: str, output: str):
    """A Beam job's block that writes `staging` (and commits it to `output`):
    on any error the staging directory is removed, and a job its runner
    reports failed raises `beam_options.job_failure`'s short error instead."""
    try:
        yield
    except BaseException as e:
        remove_tree(staging)
        failed = job_failure(e, output)
        if failed is not None:
            raise failed from None
        raise


def commit(staging: str, output: str) -> None:
    """Move a finished staging directory to `output`, replacing what was there."""
    if _is_local(output):
        atomic.move_into_place(staging, output, replace=True)
        return
    remove_tree(output)
    sources = [m.path for m in FileSystems.match([staging + "/**"])[0].metadata_list]
    destinations = [output.rstrip("/") + p[len(staging.rstrip("/")) :] for p in sources]
    FileSystems.rename(sources, destinations)
    remove_tree(staging)


def write_text(path: str, lines: Iterable[str]) -> None:
    """Write `lines` (no newlines) to one file, in the given order."""
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for line in lines:
            f.write(line.encode("utf-8") + b"\n")


def write_json(path: str, value: object) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(json.dumps(value, indent=2, sort_keys=True).encode("utf-8") + b"\n")


def read_json(path: str) -> dict:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return json.loads(f.read().decode("utf-8"))


def read_vocabulary(data_dir: str) -> tuple[list[str], list[str]]:
    """(users, items) of a `genni preprocess` output, in id order (any Beam
    file system)."""
    from genni.components import schema

    vocabulary = []
    for name in (schema.USERS_FILE, schema.ITEMS_FILE):
        path = FileSystems.join(data_dir, name)
        try:
            with FileSystems.open(path) as f:
                vocabulary.append(f.read().decode("utf-8").split())
        except OSError as e:
            raise FileNotFoundError(
                f"Cannot read {path}: is {data_dir!r} the output of `genni "
                f"preprocess`? ({e})"
            ) from None
    return vocabulary[0], vocabulary[1]


def iter_raw_lines(pattern: str) -> Iterable[tuple[str, int, bytes]]:
    """(file name, line number from 1, the line's bytes) for every line of
    every file matching `pattern`, compressed files by their extension (as
    Beam's ReadFromText). A truncated or corrupt compressed file is a
    ValueError naming it, never a silent partial read."""
    for path in input_files(pattern):
        with open_log(path) as f:
            for number, raw in enumerate(read_or_fail(path, f), start=1):
                yield path, number, raw


# Compressions read with Python's own decompressors, which raise at a stream
# cut short (Beam's `CompressedFile` stops quietly where the data ends).
DECOMPRESSORS = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
}


@contextlib.contextmanager
def open_log(path: str, opener=None):
    """A binary reader of one log file, decompressed by its extension (as
    Beam's ReadFromText); a gzip or bzip2 stream that ends early raises
    (`READ_ERRORS`) instead of ending the file there. `opener(compression)`:
    how to open the stored bytes (default: Beam's file systems)."""
    opener = opener or (lambda c: FileSystems.open(path, compression_type=c))
    decompress = DECOMPRESSORS.get(os.path.splitext(path)[1].lower())
    if decompress is None:  # Plain, or a compression Beam reads.
        with opener(CompressionTypes.AUTO) as f:
            yield f
        return
    with opener(CompressionTypes.UNCOMPRESSED) as raw, decompress(raw) as f:
        yield f


# What reading a truncated or corrupt (compressed) file raises.
READ_ERRORS = (EOFError, OSError, zlib.error)


def unreadable(path: str, error: Exception) -> ValueError:
    """The error of a log file that cannot be read to its end."""
    return ValueError(
        f"Cannot read {path} to its end ({type(error).__name__}: {error}): a "
        "truncated or corrupt compressed file?"
    )


def read_or_fail(path: str, f) -> Iterable[bytes]:
    """The lines of the open file `f`, a read error naming `path`."""
    try:
        while raw := f.readline():
            yield raw
    except READ_ERRORS as e:
        raise unreadable(path, e) from None


def iter_lines(pattern: str) -> Iterable[tuple[str, str]]:
    """(file name, line) for every line of every file matching `pattern`; a
    line that is not UTF-8 is a ValueError naming its file and line
    (`genni preprocess` sets such lines aside instead)."""
    from genni.pipeline.preprocess import formats

    for path, number, raw in iter_raw_lines(pattern):
        try:
            yield path, formats.decode(raw)
        except formats.MalformedRecord as e:
            raise ValueError(f"{path}, line {number}: {e.reason}.") from None


def input_files(pattern: str) -> list[str]:
    """Every file matching `pattern`, sorted; an error when there is none."""
    try:
        matched = FileSystems.match([pattern])[0].metadata_list
    except Exception as e:  # Beam raises BeamIOError for a missing path.
        raise FileNotFoundError(f"No input files match {pattern!r}: {e}") from None
    files = sorted(m.path for m in matched)
    if not files:
        raise FileNotFoundError(f"No input files match {pattern!r}.")
    return files

"""Reading review logs in Beam: every line of every file, in chunks.

`ReadLogs` is the first step of `genni preprocess` and `genni
batch-recommend`. Compressed files are decompressed by `outputs.open_log`,
which raises at a gzip or bzip2 stream cut short instead of ending the file
there.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io import fileio

from genni.pipeline.preprocess import outputs

CHUNK_LINES = 2000
READ_BLOCK_BYTES = 1 << 22


class ReadLineChunksFn(beam.DoFn):
    """A matched file -> (file name, first line's number, [line, ...]) chunks
    of `chunk_lines` lines, each line its bytes (decoded when parsed, so that
    a line that is not UTF-8 goes to the dead letter with its number).

    Reading whole blocks and splitting them in Python is several times cheaper
    than one runner element per line; a compressed file could not be split
    between workers anyway, and the chunks are spread by the reshuffle after.
    A truncated or corrupt compressed file is an error naming it.
    """

    def __init__(self, chunk_lines: int = CHUNK_LINES):
        self._chunk_lines = chunk_lines

    def process(self, readable: fileio.ReadableFile) -> Iterator[tuple[str, int, list]]:
        path = readable.metadata.path
        tail = b""
        chunk: list[bytes] = []
        first = 1  # The number of the chunk's first line.
        try:
            with outputs.open_log(
                path, lambda c: readable.open(compression_type=c)
            ) as f:
                while block := f.read(READ_BLOCK_BYTES):
                    lines = (tail + block).split(b"\n")
                    tail = lines.pop()
                    chunk.extend(lines)
                    while len(chunk) >= self._chunk_lines:
                        yield path, first, chunk[: self._chunk_lines]
                        chunk = chunk[self._chunk_lines :]
                        first += self._chunk_lines
        except outputs.READ_ERRORS as e:
            raise outputs.unreadable(path, e) from None
        if tail:
            chunk.append(tail)
        if chunk:
            yield path, first, chunk


class ReadLogs(beam.PTransform):
    """Every line of every file matching `pattern`, as (file, first line's
    number, [lines as bytes]) chunks."""

    def __init__(self, pattern: str, chunk_lines: int = CHUNK_LINES):
        super().__init__()
        self._pattern = pattern
        self._chunk_lines = chunk_lines

    def expand(self, p: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            p
            | "Match" >> fileio.MatchFiles(self._pattern)
            | "Open" >> fileio.ReadMatches()
            | "Chunks" >> beam.ParDo(ReadLineChunksFn(self._chunk_lines))
            | "Spread" >> beam.Reshuffle()
        )

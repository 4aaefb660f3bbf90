"""Defaults and the validated settings of `genni preprocess`.

Only entry points (the CLI, benchmarks) build a `PreprocessConfig`; the pipeline
functions take it as one explicit, typed argument.
"""

from __future__ import annotations

import dataclasses

from genni.components import schema
from genni.pipeline.preprocess import formats

DEFAULT_MAX_KCORE_ROUNDS = 30


@dataclasses.dataclass(frozen=True)
class PreprocessConfig:
    """Settings of one preprocessing run.

    Args:
        input: file glob of the review log(s), plain or gzip.
        output: directory to write (see `genni.components.schema`).
        format: one of `formats.FORMATS`, or "auto" to detect from the first line.
        min_count: k of the iterative k-core over users and items.
        min_rating: keep only events with rating > min_rating (None keeps all).
        max_len: most recent items kept per input sequence.
        item_attributes: optional S3-Rec `item2attributes.json` keyed by raw id.
        overwrite: replace a non-empty output directory.
        max_kcore_rounds: fail (rather than write a wrong core) when k-core
            filtering has not converged after this many rounds.
    """

    input: str
    output: str
    format: str = formats.AUTO
    min_count: int = schema.DEFAULT_MIN_COUNT
    min_rating: float | None = None
    max_len: int = schema.DEFAULT_MAX_LEN
    item_attributes: str | None = None
    overwrite: bool = False
    max_kcore_rounds: int = DEFAULT_MAX_KCORE_ROUNDS

    def __post_init__(self) -> None:
        if self.format not in (formats.AUTO, *formats.FORMATS):
            raise ValueError(
                f"`format` must be one of {(formats.AUTO, *formats.FORMATS)}. "
                f"Got {self.format!r}."
            )
        if self.min_count < 1:
            raise ValueError(f"`min_count` must be at least 1. Got {self.min_count}.")
        if self.max_len < 1:
            raise ValueError(f"`max_len` must be at least 1. Got {self.max_len}.")
        if self.max_kcore_rounds < 1:
            raise ValueError(
                f"`max_kcore_rounds` must be at least 1. Got {self.max_kcore_rounds}."
            )
        if self.min_rating is not None and self.format == formats.SEQUENCES:
            raise ValueError(
                "`min_rating` needs ratings, and the sequences format has none."
            )

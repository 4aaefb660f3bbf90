"""Defaults and the validated settings of `genni preprocess`.

Only entry points (the CLI, benchmarks) build a `PreprocessConfig`; the pipeline
functions take it as one explicit, typed argument.
"""

from __future__ import annotations

import dataclasses

from genni.components import schema, settings
from genni.pipeline.preprocess import formats, sequences

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
        item_attributes: optional items file keyed by raw id, in any layout
            `genni.pipeline.preprocess.catalog` reads.
        overwrite: replace a non-empty output directory.
        max_kcore_rounds: fail (rather than write a wrong core) when k-core
            filtering has not converged after this many rounds.
        split: "leave_one_out" (each user's last event is the test case, the
            one before it the validation case) or "time" (cutoffs in calendar
            time over the whole log: the last `test_days` days are the test
            window, the `valid_days` before them the validation window, and
            only events before the validation cutoff are learned or counted).
        test_days, valid_days: the windows of the split by time (days;
            `valid_days` defaults to `test_days`).
        min_cases: under the split by time, the scoreable cases (a target
            the vocabulary knows) each window must hold; a window with fewer
            is widened, doubling its days, while the events learned stay at
            least half of the log's (`genni.pipeline.preprocess.windows`);
            one still short is reported (`stats.json`: `time_split`), and the
            guarded export refuses to judge on it. 0: windows as given.
        previous: an earlier `genni preprocess` output whose user and item
            ids are kept (new ones come after): a model trained on it can be
            warm-started on this one (`genni train --warm-start`).
        hold_out_items, hold_out_seed: under leave-one-out, the share of the
            items (drawn with the seed: `sequences.held_out_items`) that no
            training or validation example holds; they stay in the vocabulary
            and are met as test targets only (the cold-start benchmark).
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
    split: str = sequences.LEAVE_ONE_OUT
    test_days: float | None = None
    valid_days: float | None = None
    previous: str | None = None
    min_cases: int = 0
    hold_out_items: float = 0.0
    hold_out_seed: int = 0

    @property
    def windows(self) -> tuple[float, float]:
        """(validation days, test days) of the split by time."""
        test = float(self.test_days or 0.0)
        return (float(self.valid_days) if self.valid_days else test), test

    def __post_init__(self) -> None:
        settings.coerce_fields(self)  # The one rule of types (flags, YAML).
        if self.split not in sequences.SPLIT_RULES:
            raise ValueError(
                f"`split` must be one of {sequences.SPLIT_RULES}. Got {self.split!r}."
            )
        if self.split == sequences.TIME:
            if self.test_days is None or self.test_days < 0:
                raise ValueError(
                    "--split time needs --test-days D, a positive number (0: no "
                    "windows, every event learned)."
                )
            if self.test_days == 0 and self.valid_days:
                raise ValueError(
                    "--test-days 0 learns every event: it takes no --valid-days "
                    f"(got {self.valid_days})."
                )
            if self.valid_days is not None and self.valid_days < 0:
                raise ValueError(
                    f"--valid-days must be positive. Got {self.valid_days}."
                )
            if self.valid_days == 0 and self.test_days:
                raise ValueError("--valid-days must be positive. Got 0.")
            if self.format == formats.SEQUENCES:
                raise ValueError(
                    "--split time needs timestamps, and the sequences format has none."
                )
        elif (
            self.test_days is not None or self.valid_days is not None or self.min_cases
        ):
            raise ValueError(
                "--test-days, --valid-days and --min-cases need --split time."
            )
        if not 0.0 <= self.hold_out_items < 1.0:
            raise ValueError(
                f"`hold_out_items` must be in [0, 1). Got {self.hold_out_items}."
            )
        if self.hold_out_items and (
            self.split != sequences.LEAVE_ONE_OUT or self.previous
        ):
            raise ValueError(
                "--hold-out-items holds items out of a leave-one-out split, with "
                "no --previous."
            )
        if self.min_cases < 0:
            raise ValueError(f"`min_cases` must be at least 0. Got {self.min_cases}.")
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

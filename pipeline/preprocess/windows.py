"""Windows of the split by time that hold enough cases to judge a model.

A window of a sparse log can hold a handful of cases, most of them items the
vocabulary never saw: a model chosen or judged on it is chosen on noise. With
`min_cases` (`PreprocessConfig`), each window must hold that many scoreable
cases (a target the vocabulary knows). A window with fewer is widened, its
days doubled, and the log preprocessed again, while the two windows together
stay within half of the log's days (what is learned keeps the older half);
a window still short at that limit is kept and reported: `stats.json`'s
`time_split` says how many scoreable cases it holds against `min_cases`, and
`genni export --against` refuses to judge on it (`short_windows`).
"""

from __future__ import annotations

import dataclasses

from genni.components import schema
from genni.pipeline.preprocess import sequences
from genni.pipeline.preprocess.config import PreprocessConfig

WINDOWS = (schema.VALID, schema.TEST)


def scoreable(stats: dict, split: str) -> int:
    """The cases of `split` whose target the vocabulary knows."""
    window = stats["time_split"]
    return window[f"{split}_cases"] - window[f"{split}_new_item_targets"]


def short_windows(stats: dict) -> list[str]:
    """The windows holding fewer scoreable cases than the dataset's
    `min_cases` ([] under leave-one-out, without a minimum, or with none)."""
    window = stats.get("time_split") or {}
    need = window.get("min_cases") or 0
    if not need or not window.get("test_days"):
        return []
    return [s for s in WINDOWS if scoreable(stats, s) < need]


def describe(stats: dict) -> str:
    """'valid 12 scoreable cases of 29 (14 days), test ...' for people."""
    window = stats["time_split"]
    return ", ".join(
        f"{s} {scoreable(stats, s):,} scoreable of {window[f'{s}_cases']:,} cases "
        f"({window[f'{s}_days']:g} days)"
        for s in WINDOWS
    )


def widened(stats: dict) -> tuple[float, float] | None:
    """The next (valid days, test days) for the windows of `stats`, each
    short one doubled, or None when none is short or doubling would take
    more than half of the log's days."""
    window = stats["time_split"]
    short = short_windows(stats)
    if not short:
        return None
    days = {s: window[f"{s}_days"] for s in WINDOWS}
    wider = {s: 2 * d if s in short else d for s, d in days.items()}
    if sum(wider.values()) > window.get("log_days", 0.0) / 2:
        return None
    return wider[schema.VALID], wider[schema.TEST]


def preprocess(config: PreprocessConfig, run, log=print) -> dict:
    """`run(config)` (a preprocessing function returning stats), the
    windows widened while `widened` says so; returns the final stats, which
    record the days asked for (`asked_days`) when they were widened."""
    stats = run(config)
    asked = config.windows
    while (
        config.split == sequences.TIME
        and config.min_cases
        and (wider := widened(stats))
    ):
        log(
            f"preprocess: too few cases to judge a model ({describe(stats)}; "
            f"at least {config.min_cases} each): windows widened to valid "
            f"{wider[0]:g} days, test {wider[1]:g} days"
        )
        config = dataclasses.replace(
            config, valid_days=wider[0], test_days=wider[1], overwrite=True
        )
        stats = run(config)
    if config.windows != asked:  # Recorded beside what was used.
        from apache_beam.io.filesystems import FileSystems

        from genni.pipeline.preprocess import outputs

        stats["time_split"]["asked_days"] = {
            schema.VALID: asked[0],
            schema.TEST: asked[1],
        }
        outputs.write_json(FileSystems.join(config.output, schema.STATS_FILE), stats)
    short = short_windows(stats)
    if short:
        log(
            f"preprocess: warning: {' and '.join(short)} below {config.min_cases} "
            f"scoreable cases at the widest windows ({describe(stats)}): a model "
            "judged there is judged on noise; the guarded export refuses to."
        )
    return stats

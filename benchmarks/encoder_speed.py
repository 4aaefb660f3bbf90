"""What each encoder costs per epoch against SASRec, under the default preset.

Training steps of `genni train --encoder E` for every registered encoder, on
packed and on unpacked batches, timed side by side in one process
(`research.speed.step_times`, interleaved rounds). Within one batch layout
every encoder takes the same number of steps per epoch, so the step-time
ratio is the epoch ratio. Target (issue 53): at most 1.5x SASRec's.

    python benchmarks/encoder_speed.py [--data DIR] [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import sys

from _common import layout_ratio_rows, publish, time_side_by_side

from genni.models.config import FIRST_ENCODER
from genni.models.encoders import registry
from genni.pipeline.training.config import DEFAULT_PRESET, preset

TARGET = 1.5


def configs() -> dict[str, dict]:
    return {
        f"{name}, {'packed' if pack else 'unpacked'}": dict(
            preset(DEFAULT_PRESET), encoder=name, pack=pack
        )
        for pack in (True, False)
        for name in registry.names()
    }


def main(argv: list[str] | None = None) -> int:
    args, times, median = time_side_by_side(__doc__, configs(), 5, argv)
    lines = [
        "# Each encoder's cost per epoch",
        "",
        f"The {DEFAULT_PRESET} preset, batches of 256, {args.steps} steps per "
        f"configuration and round, median of {args.rounds} interleaved rounds in "
        f"one process; data `{args.data or 'Beauty'}`.",
        "",
        f"| encoder | layout | ms / step | x {FIRST_ENCODER} (same layout) |",
        "|---|---|---|---|",
    ]
    rows, ratios = layout_ratio_rows(median, registry.names(), FIRST_ENCODER)
    lines += rows
    worst = max(ratios.values())
    lines += [
        "",
        f"Largest ratio {worst:.2f} (target <= {TARGET}: "
        f"{'met' if worst <= TARGET else 'NOT met'}).",
    ]
    publish(
        "encoder_speed",
        lines,
        {"seconds_per_step": times, "median": median, "ratios": ratios},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

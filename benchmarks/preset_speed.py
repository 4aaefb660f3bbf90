"""What the recommended preset costs per epoch against the paper's GenNi.

Training steps of `genni train --preset paper` (BCE, one GenNi negative) and
`--preset recommended`, the default (GenNi's 64 negatives under the corrected
sampled softmax), on packed and on unpacked batches, timed side by side in one process
(`research.speed.step_times`). Within one batch layout both
take the same number of steps per epoch, so the step-time ratio is the epoch
ratio. Target (issue 31): at most 2x, packed and unpacked.

    python benchmarks/preset_speed.py [--data DIR] [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import sys

from _common import publish_layout_ratios, time_side_by_side, timing_head

from genni.pipeline.training.config import preset

PRESETS = ("paper", "recommended")
TARGET = 2.0


def configs() -> dict[str, dict]:
    return {
        f"{name}, {'packed' if pack else 'unpacked'}": dict(preset(name), pack=pack)
        for pack in (True, False)
        for name in PRESETS
    }


def main(argv: list[str] | None = None) -> int:
    args, times, median = time_side_by_side(__doc__, configs(), 5, argv)
    lines = timing_head(
        args,
        "# The recommended preset's cost per epoch",
        "Batches of 256",
        ("preset", "layout", "ms / step", "x paper (same layout)"),
    )
    worst_of = [f"recommended, {layout}" for layout in ("packed", "unpacked")]
    publish_layout_ratios(
        "preset_speed", lines, times, median, PRESETS, "paper", TARGET, worst_of
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

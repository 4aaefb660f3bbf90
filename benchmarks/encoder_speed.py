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

from _common import publish_layout_ratios, time_side_by_side, timing_head

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
    lines = timing_head(
        args,
        "# Each encoder's cost per epoch",
        f"The {DEFAULT_PRESET} preset, batches of 256",
        ("encoder", "layout", "ms / step", f"x {FIRST_ENCODER} (same layout)"),
    )
    names = registry.names()
    publish_layout_ratios(
        "encoder_speed", lines, times, median, names, FIRST_ENCODER, TARGET
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

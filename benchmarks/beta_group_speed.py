"""What a fresh V' per group of positions (`--beta-group`) costs GenNi.

GenNi scores a beta fraction V' of the items, drawn once per batch or, with
`--beta-group G`, afresh for every G positions. Training steps of uniform and
of GenNi with each, at beta 0.1 and 0.001, on packed batches, are timed side
by side in one process (`research.speed.step_times`) and
printed as ratios to uniform.

    python benchmarks/beta_group_speed.py [--data DIR] [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import sys

from _common import publish, time_side_by_side, timing_head

from research import report

GROUP = report.BETA_GROUP


def configs() -> dict[str, dict]:
    found = {"uniform": dict(sampler="uniform", pack=True)}
    for beta in (0.1, 0.001):
        genni = dict(sampler="genni", beta=beta, pack=True)
        found[f"genni beta {beta:g}"] = genni
        found[f"genni beta {beta:g}, V' per {GROUP}"] = dict(genni, beta_group=GROUP)
    return found


def main(argv: list[str] | None = None) -> int:
    args, times, median = time_side_by_side(__doc__, configs(), 5, argv)
    lines = timing_head(
        args,
        "# GenNi: one V' per batch vs a fresh V' per group of positions",
        "Packed batches of 256",
        ("sampler", "ms / step", "x uniform"),
        data=False,
    )
    lines += [
        f"| {name} | {1000 * t:.0f} | {t / median['uniform']:.2f} |"
        for name, t in median.items()
    ]
    publish("beta_group_speed", lines, {"seconds_per_step": times, "median": median})
    return 0


if __name__ == "__main__":
    sys.exit(main())

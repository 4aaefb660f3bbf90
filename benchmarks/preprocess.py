"""Beam DirectRunner vs a plain single-process implementation of preprocessing.

Both run the same steps on the same log in one invocation, alternating, and the
median times and their ratio are reported. Targets (issue 2): Beam within 3x of
the plain implementation and under 60 s on the Toys log on a 2-core machine.

    python benchmarks/preprocess.py [--input LOG] [--repeats 3]
"""

from __future__ import annotations

import argparse
import filecmp
import logging
import os
import statistics
import sys
import tempfile
import time

from _common import SHARED_DATA, machine, write_results

from genni.components import schema
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig

RATIO_TARGET = 3.0
SECONDS_TARGET = 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--input", default=str(SHARED_DATA / "reviews_Toys_and_Games.json.gz")
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if not os.path.exists(args.input):
        print(f"Skipped: {args.input} not found (pass --input).")
        return 0
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    import tensorflow  # noqa: F401  Imported before timing: both runs use it.

    times: dict[str, list[float]] = {"beam": [], "plain": []}
    with tempfile.TemporaryDirectory() as tmp:
        outs = {name: os.path.join(tmp, name) for name in times}
        runners = {
            "beam": lambda c: preprocess.preprocess(c, []),
            "plain": inmemory.run,
        }
        for repeat in range(args.repeats):
            order = ["beam", "plain"] if repeat % 2 == 0 else ["plain", "beam"]
            for name in order:
                config = PreprocessConfig(
                    input=args.input, output=outs[name], overwrite=True
                )
                start = time.perf_counter()
                stats = runners[name](config)
                times[name].append(time.perf_counter() - start)
                print(f"  {name:5s} run {repeat + 1}: {times[name][-1]:.2f} s")
        same = all(
            filecmp.cmp(
                os.path.join(outs["beam"], f),
                os.path.join(outs["plain"], f),
                shallow=False,
            )
            for f in (schema.SEQUENCES_FILE, schema.ITEMS_FILE, schema.STATS_FILE)
        )

    beam_s = statistics.median(times["beam"])
    plain_s = statistics.median(times["plain"])
    ratio = beam_s / plain_s
    results = {
        "input": args.input,
        "events": stats["events"],
        "lines_read": stats["lines_read"],
        "repeats": args.repeats,
        "beam_seconds": times["beam"],
        "plain_seconds": times["plain"],
        "beam_median_s": round(beam_s, 3),
        "plain_median_s": round(plain_s, 3),
        "ratio": round(ratio, 3),
        "ratio_target": RATIO_TARGET,
        "seconds_target": SECONDS_TARGET,
        "ratio_ok": ratio <= RATIO_TARGET,
        "seconds_ok": beam_s <= SECONDS_TARGET,
        "outputs_identical": same,
        "machine": machine(),
    }
    markdown = (
        "# Preprocessing: Beam DirectRunner vs plain Python\n\n"
        f"Input `{os.path.basename(args.input)}`: {stats['lines_read']:,} lines, "
        f"{stats['events']:,} events kept. Median of {args.repeats} alternating "
        f"runs on {machine()['cpus']} CPUs.\n\n"
        "| implementation | median s | runs |\n|---|---|---|\n"
        f"| Beam DirectRunner | {beam_s:.2f} | "
        + ", ".join(f"{t:.2f}" for t in times["beam"])
        + f" |\n| plain Python | {plain_s:.2f} | "
        + ", ".join(f"{t:.2f}" for t in times["plain"])
        + " |\n\n"
        f"Ratio Beam / plain: **{ratio:.2f}** (target <= {RATIO_TARGET}); "
        f"Beam {beam_s:.1f} s (target < {SECONDS_TARGET:.0f} s). "
        f"Outputs identical: {same}.\n\n"
        "Command: `python benchmarks/preprocess.py`\n"
    )
    print(markdown)
    write_results("preprocess", results, markdown)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

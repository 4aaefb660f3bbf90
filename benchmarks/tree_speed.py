"""A code change's cost per training step: this checkout against another one.

Each encoder's training step (`benchmarks/encoder_speed.py`'s configurations:
every registered encoder, packed and unpacked, the default preset) is timed
under two checkouts of the project, this one ("after") and `--against DIR`
("before", e.g. a `git worktree` of the commit before the change). One
process per checkout and round, the checkouts' processes interleaved round by
round (ABBA order), each timing `--inner` rounds of `--steps` steps after its
warm-up; the ratio per configuration is after / before of the medians, so
what else the machine does slows both alike.

    git worktree add ../before HEAD~1
    python benchmarks/tree_speed.py --data DIR --against ../before [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from _common import ROOT, publish, timing_parser

# What a checkout installs as `genni` (setup.py's mapping).
FOLDERS = ("pipeline", "models", "components")


def importable(tree: str, into: str) -> str:
    """A directory whose `genni` is `tree`'s code (its folders linked as
    setup.py maps them), for PYTHONPATH; returns it."""
    package = os.path.join(into, "genni")
    os.makedirs(package)
    shutil.copy(os.path.join(tree, "genni", "__init__.py"), package)
    for folder in FOLDERS:
        os.symlink(os.path.abspath(os.path.join(tree, folder)), f"{package}/{folder}")
    return into


def worker(args) -> int:
    """One checkout's round: the median seconds per step of each configuration
    over `--inner` rounds, as JSON on the last line."""
    from encoder_speed import configs

    import genni
    from research import speed

    times = speed.step_times(args.data, configs(), args.inner, args.steps, False)
    median = {name: statistics.median(t) for name, t in times.items()}
    code = os.path.realpath(os.path.join(os.path.dirname(genni.__file__), "models"))
    print(json.dumps({"code": os.path.dirname(code), "median": median}))
    return 0


def one_round(path: str, args, cwd: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = path  # Before the installed package, and the clone.
    command = [sys.executable, os.path.abspath(__file__), "--worker"]
    command += ["--data", args.data, "--steps", str(args.steps)]
    command += ["--inner", str(args.inner)]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, rounds=4)
    parser.add_argument("--against", help="The other checkout (before).")
    parser.add_argument("--inner", type=int, default=3, help="Rounds per process.")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if not (args.data and args.against):
        parser.error("--data and --against are needed.")
    args.data = os.path.abspath(args.data)
    times: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            "before": importable(args.against, os.path.join(tmp, "before")),
            "after": importable(str(ROOT), os.path.join(tmp, "after")),
        }
        code = {}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for tree in order:
                done = one_round(paths[tree], args, tmp)
                code[tree] = done["code"]  # The checkout the process ran.
                for name, t in done["median"].items():
                    times[tree].setdefault(name, []).append(t)
                print(f"  round {r + 1} {tree}: " + _ms(times[tree]), flush=True)
    median = {
        tree: {name: statistics.median(t) for name, t in by_name.items()}
        for tree, by_name in times.items()
    }
    lines = [
        "# A change's cost per training step: after / before",
        "",
        f"Each encoder under the default preset, batches of 256; per checkout and "
        f"round one process timing {args.inner} rounds of {args.steps} steps "
        f"(median), {args.rounds} rounds with the checkouts interleaved (ABBA); "
        f"median over rounds. Data `{args.data}`; the code timed: before "
        f"`{code['before']}`, after `{code['after']}`.",
        "",
        "| encoder | layout | before ms / step | after ms / step | after / before |",
        "|---|---|---|---|---|",
    ]
    ratios = {}
    for name in median["after"]:
        before, after = median["before"][name], median["after"][name]
        ratios[name] = after / before
        encoder, layout = name.split(", ")
        lines.append(
            f"| {encoder} | {layout} | {1000 * before:.0f} | {1000 * after:.0f} | "
            f"{after / before:.3f} |"
        )
    publish("tree_speed", lines, {"seconds_per_step": times, "ratios": ratios})
    return 0


def _ms(by_name: dict[str, list[float]]) -> str:
    return ", ".join(f"{n} {1000 * t[-1]:.0f} ms" for n, t in by_name.items())


if __name__ == "__main__":
    sys.exit(main())

"""Training-step time on the CPU with malloc vs TensorFlow's BFC allocator.

`pipeline/__init__.py` turns on TensorFlow's pooling (BFC) allocator for the
CPU (`TF_CPU_ALLOCATOR_USE_BFC=true`): with plain malloc every step maps and
unmaps GenNi's large score blocks afresh, and on small VMs the page faults
cost as much as the math. The allocator is chosen when TensorFlow starts, so
each setting runs in its own process; the two alternate, round by round, so
that machine noise hits both alike. Each process times the same training steps
(`research.speed.step_times`: GenNi beta 1 and uniform, packed
and not) and
reports its user and kernel CPU seconds.

    python benchmarks/cpu_allocator.py [--data DIR] [--rounds 3] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from _common import beauty_data, publish, timing_parser

CONFIGS = {
    "uniform": dict(sampler="uniform"),
    "genni_beta1": dict(sampler="genni", beta=1.0),
    "uniform_pack": dict(sampler="uniform", pack=True),
    "genni_beta1_pack": dict(sampler="genni", beta=1.0, pack=True),
}
SETTINGS = {"malloc": "false", "bfc": "true"}


def child(data_dir: str, steps: int) -> dict:
    """One process's step times (s) and its CPU seconds."""
    from research import speed

    times = speed.step_times(data_dir, CONFIGS, rounds=1, steps=steps, verbose=False)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "seconds_per_step": {name: t[0] for name, t in times.items()},
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
    }


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, rounds=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.data, args.steps)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data or beauty_data(tmp, synthetic=True)
        runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
        command = [sys.executable, __file__, "--child", "--steps", str(args.steps)]
        for r in range(args.rounds):
            for name, value in SETTINGS.items():
                env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC=value)
                out = subprocess.run(
                    [*command, "--data", data_dir],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
                ms = runs[name][-1]["seconds_per_step"]
                print(
                    f"round {r + 1} {name}: "
                    + ", ".join(f"{c} {1000 * t:.0f} ms" for c, t in ms.items()),
                    flush=True,
                )
    median = {
        name: {
            c: statistics.median(run["seconds_per_step"][c] for run in found)
            for c in CONFIGS
        }
        for name, found in runs.items()
    }
    cpu = {
        name: {
            k: statistics.median(run[k] for run in found) for k in ("user_s", "sys_s")
        }
        for name, found in runs.items()
    }
    lines = [
        "# CPU allocator: malloc vs TensorFlow's BFC",
        "",
        f"Median of {args.rounds} alternating rounds, one process per setting and "
        f"round, {args.steps} training steps per configuration (batch 256), "
        f"{os.cpu_count()} CPUs. CPU seconds are the whole process's (start-up "
        "and tracing included).",
        "",
        "| configuration | malloc ms / step | BFC ms / step | malloc / BFC |",
        "|---|---|---|---|",
    ]
    for c in CONFIGS:
        a, b = median["malloc"][c], median["bfc"][c]
        lines.append(f"| {c} | {1000 * a:.0f} | {1000 * b:.0f} | {a / b:.2f} |")
    lines += [
        "",
        "| allocator | process user s | process kernel s |",
        "|---|---|---|",
    ]
    for name in SETTINGS:
        lines.append(
            f"| {name} | {cpu[name]['user_s']:.1f} | {cpu[name]['sys_s']:.1f} |"
        )
    publish("cpu_allocator", lines, {"runs": runs, "median": median, "cpu": cpu})
    return 0


if __name__ == "__main__":
    sys.exit(main())

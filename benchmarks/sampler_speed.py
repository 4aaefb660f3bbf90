"""Training speed of uniform vs GenNi (beta 1 and 0.1), and GenNi at scale.

Part 1 times training steps of the same model with each sampler, interleaved
round by round in one process so that machine noise hits all alike, and prints
the ratios to uniform (targets: GenNi beta 1 <= 1.5x, beta 0.1 <= 1.05x), then
the same on packed batches (`--pack`), and a validation pass unpacked vs packed.
Part 2 times one GenNi draw for a batch of 256 x 50 positions (d = 64, beta 1)
as the catalog grows to 10^6 items, each size in a fresh process so that its
peak memory (max RSS) is its own (target: under 8 GiB at 10^6).

    python benchmarks/sampler_speed.py [--data DIR] [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _common import SHARED_DATA, beauty_data, machine, write_results

from research import speed

CONFIGS = {
    "uniform": dict(sampler="uniform"),
    "genni_beta1": dict(sampler="genni", beta=1.0),
    "genni_beta0.1": dict(sampler="genni", beta=0.1),
    "genni_beta1_exclude_seen": dict(sampler="genni", beta=1.0, exclude_seen=True),
}
# The same samplers on packed batches (`--pack`): a fraction of the encoder's
# work, the sampler's unchanged.
PACKED = {f"{name}_pack": dict(config, pack=True) for name, config in CONFIGS.items()}
SCALE_ITEMS = (10_000, 100_000, 1_000_000)
POSITIONS = 256 * 50
GIB = 1 << 30


def eval_times(data_dir: str, rounds: int) -> dict[str, list[float]]:
    """Seconds per full-ranking validation pass, unpacked vs packed, interleaved."""
    from genni.components import schema
    from genni.pipeline.training import data, train
    from genni.pipeline.training.config import TrainConfig

    dataset = data.Dataset.open(data_dir)
    model = train.build_model(TrainConfig.of(data=data_dir, output=""), dataset)
    evaluators = {
        name: train.Evaluator(dataset, schema.VALID, pack=pack)
        for name, pack in (("unpacked", False), ("packed", True))
    }
    for evaluator in evaluators.values():
        evaluator(model)  # Trace, fill the caches.
    times: dict[str, list[float]] = {name: [] for name in evaluators}
    for _ in range(rounds):
        for name, evaluator in evaluators.items():
            start = time.perf_counter()
            evaluator(model)
            times[name].append(time.perf_counter() - start)
    return times


def scale_point(num_items: int) -> dict:
    """Run in a child process: one GenNi draw over `num_items` items."""
    import tensorflow as tf

    from genni.components.samplers import GenNiSampler

    table = tf.random.normal([num_items + 1, 64], stddev=0.1)
    queries = tf.random.normal([POSITIONS, 64])
    targets = tf.random.uniform([POSITIONS], 1, num_items + 1, dtype=tf.int64)
    sampler = GenNiSampler(num_items, 1, alpha=2.5, beta=1.0, seed=0)
    draw = tf.function(lambda: sampler(queries, targets, table))
    draw().numpy()  # Trace.
    runs = 1 if num_items >= 1_000_000 else 3
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        draw().numpy()
        times.append(time.perf_counter() - start)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "items": num_items,
        "positions": POSITIONS,
        "seconds": statistics.median(times),
        "peak_rss_gib": peak_kib * 1024 / GIB,
        "chunk_rows": sampler.chunk_rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="Preprocessed dataset dir.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--scale-point", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.scale_point:
        print(json.dumps(scale_point(args.scale_point)))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data
        if data_dir is None:
            if not (SHARED_DATA / "Beauty.txt").exists():
                print("Skipped: pass --data (no ../shared/data/Beauty.txt).")
                return 0
            data_dir = beauty_data(tmp)
        print(f"Part 1: training steps on {data_dir}")
        times = speed.step_times(data_dir, CONFIGS | PACKED, args.rounds, args.steps)
        evaluation = {
            name: statistics.median(t)
            for name, t in eval_times(data_dir, args.rounds).items()
        }
    medians = {name: statistics.median(t) for name, t in times.items()}
    ratios = {
        name: medians[name] / medians["uniform"]
        for name in CONFIGS
        if name != "uniform"
    }
    packed = {
        name: {
            "ms_per_step": 1000 * medians[name],
            "speedup_over_unpacked": medians[name.removesuffix("_pack")]
            / medians[name],
            "ratio_to_uniform_pack": medians[name] / medians["uniform_pack"],
        }
        for name in PACKED
    }

    scale = []
    if not args.skip_scale:
        print("Part 2: one GenNi draw, 256 x 50 positions, beta 1, as |V| grows")
        for items in SCALE_ITEMS:
            out = subprocess.run(
                [sys.executable, __file__, "--scale-point", str(items)],
                capture_output=True,
                text=True,
                check=True,
            )
            point = json.loads(out.stdout.strip().splitlines()[-1])
            scale.append(point)
            print(
                f"  |V| = {items:>9,}: {point['seconds']:.2f} s, peak RSS "
                f"{point['peak_rss_gib']:.2f} GiB"
            )

    results = {
        "data": data_dir,
        "rounds": args.rounds,
        "steps_per_round": args.steps,
        "ms_per_step": {n: 1000 * m for n, m in medians.items()},
        "ratios_to_uniform": ratios,
        "packed": packed,
        "eval_seconds": evaluation,
        "targets": {"genni_beta1": 1.5, "genni_beta0.1": 1.05},
        "scale": scale,
        "machine": machine(),
    }
    md = [
        "# Sampler speed\n",
        f"Training steps (batch 256), median of {args.rounds} interleaved rounds of "
        f"{args.steps} steps, {machine()['cpus']} CPUs.\n",
        "| sampler | ms / step | ratio to uniform | target |",
        "|---|---|---|---|",
        f"| uniform | {1000 * medians['uniform']:.0f} | 1.00 | |",
    ]
    for name in ratios:
        target = results["targets"].get(name)
        md.append(
            f"| {name} | {1000 * medians[name]:.0f} | {ratios[name]:.2f} | "
            + (f"<= {target} |" if target else "|")
        )
    md += [
        "\nThe same steps on packed batches (`genni train --pack`: several sequences "
        "per row, the same outputs and loss):\n",
        "| sampler | ms / step | x faster than unpacked | ratio to uniform packed |",
        "|---|---|---|---|",
    ]
    md += [
        f"| {name} | {p['ms_per_step']:.0f} | {p['speedup_over_unpacked']:.2f} | "
        f"{p['ratio_to_uniform_pack']:.2f} |"
        for name, p in packed.items()
    ]
    md.append(
        f"\nOne full-ranking validation pass (median of {args.rounds}): unpacked "
        f"{evaluation['unpacked']:.2f} s, packed {evaluation['packed']:.2f} s."
    )
    if scale:
        md += [
            "\nOne GenNi draw (beta 1, 256 x 50 positions, d 64), own process each:\n",
            "| items | seconds | peak RSS GiB | rows per chunk |",
            "|---|---|---|---|",
        ]
        md += [
            f"| {p['items']:,} | {p['seconds']:.2f} | {p['peak_rss_gib']:.2f} | "
            f"{p['chunk_rows']} |"
            for p in scale
        ]
    md.append("\nCommand: `python benchmarks/sampler_speed.py`\n")
    markdown = "\n".join(md)
    print(markdown)
    write_results("sampler_speed", results, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Warm start on a grown log: how to set the new items' rows, and what it saves.

The log is cut `--grow-days` days before its end: that is "yesterday's" log.
Both logs are preprocessed with the split by time (`--test-days`), the grown
one with `--previous` (stable ids). A base run trains on yesterday's log; on
the grown log, three runs with the same settings and early stopping:

- from scratch;
- warm-started from the base run, new items' rows random (as a fresh run);
- warm-started, new items' rows the mean of the base run's rows.

Side by side: validation and test NDCG@10 / HR@10 at the best epoch, the
epochs to it, training seconds. Writes benchmarks/results/<name>.{json,md}.

    python benchmarks/warm_start.py --input ../shared/data/ml-100k.inter \
        --grow-days 7 --test-days 7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from _common import SHARED_DATA, machine, write_results

from genni.pipeline.loop import cases
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess import outputs
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training import train
from genni.pipeline.training.config import TrainConfig, preset

VARIANTS = (
    ("scratch", {}),
    ("warm, random new rows", {"warm_start_rows": "random"}),
    ("warm, mean new rows", {"warm_start_rows": "mean"}),
)


def cut_log(source: str, target: str, days: float) -> float:
    """Write the lines of `source` whose events came at least `days` days
    before its last one (a header line kept); returns the cut time."""
    lines, times, _ = cases.read_log(source)
    cut = max(t for ts in times for t in ts) - days * cases.DAY
    cases.write_cut(lines, times, cut, target)
    return cut


def run(config: TrainConfig) -> dict:
    start = time.perf_counter()
    result = train.train(config, verbose=0)
    return {
        "best_epoch": result["best_epoch"],
        "epochs_run": result["epochs_run"],
        "train_seconds": round(time.perf_counter() - start, 1),
        "valid": {k: result["valid"][k] for k in ("HR@10", "NDCG@10")},
        "test": {k: result["test"][k] for k in ("HR@10", "NDCG@10")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=str(SHARED_DATA / "ml-100k.inter"))
    parser.add_argument("--grow-days", type=float, default=7.0)
    parser.add_argument("--test-days", type=float, default=7.0)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="Keep the runs here.")
    parser.add_argument("--name", default="warm_start")
    parser.add_argument(
        "--warm-learning-rates",
        type=float,
        nargs="*",
        default=[],
        help="Also warm-start (random new rows) at each of these learning rates.",
    )
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="warm_start_")
    os.makedirs(work, exist_ok=True)
    old_log = os.path.join(work, "old" + os.path.splitext(args.input)[1])
    cut = cut_log(args.input, old_log, args.grow_days)
    old, new = os.path.join(work, "old_data"), os.path.join(work, "new_data")
    split = dict(split="time", test_days=args.test_days, overwrite=True)
    preprocess.preprocess(PreprocessConfig(old_log, old, **split))
    stats = preprocess.preprocess(
        PreprocessConfig(args.input, new, previous=old, **split)
    )
    settings = dict(preset("recommended"), epochs=args.epochs, seed=args.seed)
    base_dir = os.path.join(work, "base")
    shutil.rmtree(base_dir, ignore_errors=True)
    base = run(TrainConfig.of(data=old, output=base_dir, **settings))
    rows = []
    variants = list(VARIANTS) + [
        (f"warm, learning rate {lr:g}", {"learning_rate": lr})
        for lr in args.warm_learning_rates
    ]
    for label, extra in variants:
        output = os.path.join(work, label.split(",")[0] + "_" + str(len(rows)))
        shutil.rmtree(output, ignore_errors=True)
        if extra:
            extra = {**settings, **extra, "warm_start": base_dir}
        result = run(TrainConfig.of(data=new, output=output, **{**settings, **extra}))
        rows.append({"variant": label, **result})
        print(label, json.dumps(result), flush=True)
    command = (
        f"python benchmarks/warm_start.py --input {os.path.relpath(args.input)} "
        f"--grow-days "
        f"{args.grow_days:g} --test-days {args.test_days:g} --epochs {args.epochs} "
        f"--seed {args.seed}"
    )
    if args.warm_learning_rates:
        command += " --warm-learning-rates " + " ".join(
            f"{lr:g}" for lr in args.warm_learning_rates
        )
    time_split = stats["time_split"]
    lines = [
        f"# Warm start on a grown log ({os.path.basename(args.input)})",
        "",
        f"`{command}`",
        "",
        f"Yesterday's log ends {args.grow_days:g} days before the grown one "
        f"(cut at unix time {cut:.0f}); both split by time, the last "
        f"{args.test_days:g} days the test window and the {args.test_days:g} "
        f"before them validation. The grown log: {stats['items']:,} items, of "
        f"which {stats['items'] - base_items(old):,} new; test targets that are "
        f"new items: {100 * time_split['test_new_item_share']:.1f}%. Recommended "
        f"preset, seed {args.seed}, early stopping as `genni train`. Base run "
        f"on yesterday's log: best epoch {base['best_epoch']}, "
        f"{base['train_seconds']:.0f} s.",
        "",
        "| run on the grown log | best epoch | epochs run | train s | valid NDCG@10 | "
        "test HR@10 | test NDCG@10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['best_epoch']} | {r['epochs_run']} | "
            f"{r['train_seconds']:.0f} | {r['valid']['NDCG@10']:.2f} | "
            f"{r['test']['HR@10']:.2f} | {r['test']['NDCG@10']:.2f} |"
        )
    write_results(
        args.name,
        {"command": command, "machine": machine(), "base": base, "runs": rows},
        "\n".join(lines) + "\n",
    )


def base_items(data_dir: str) -> int:
    return len(outputs.read_vocabulary(data_dir)[1])


if __name__ == "__main__":
    main()

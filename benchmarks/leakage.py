"""The same model under leave-one-out and under the split by time.

Leave-one-out holds out each user's last event wherever it falls on the
calendar, so training sees events that came after other users' test events
(Ji et al., TOIS 2023). The split by time trains on what came before a cutoff
and tests on what came after. This runs the recommended preset on one log
under both, with GenNi's negatives and with uniform ones, and reports:

- the metrics of each (validation and test at the best validation epoch);
- GenNi against uniform under each split (does the leak reorder them?);
- how much of leave-one-out's training log lies in a test case's future.

Writes benchmarks/results/<name>.{json,md}.

    python benchmarks/leakage.py --input ../shared/data/ml-100k.inter
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
from _common import SHARED_DATA, machine, write_results

from genni.pipeline.loop import cases
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training import train
from genni.pipeline.training.config import TrainConfig, preset

METRICS = ("HR@10", "NDCG@10")


def future_share(events: dict) -> dict:
    """Under leave-one-out (each user's last event the test target, the one
    before it validation): for each test case, the share of the training
    events that came after it; averaged over test cases, and the share of
    test cases with any training event after them. On the raw log."""
    tests, training = [], []
    for timed in events.values():
        if len(timed) < 3:
            continue
        tests.append(timed[-1][0])
        training.extend(t for t, _ in timed[:-2])
    training = np.sort(np.asarray(training))
    after = len(training) - np.searchsorted(training, np.asarray(tests), "right")
    return {
        "test_cases": len(tests),
        "mean_training_share_after_test": round(
            float(np.mean(after / len(training))), 4
        ),
        "test_cases_with_later_training": round(float(np.mean(after > 0)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=str(SHARED_DATA / "ml-100k.inter"))
    parser.add_argument("--test-days", type=float, default=14.0)
    parser.add_argument("--valid-days", type=float, default=14.0)
    parser.add_argument("--samplers", nargs="+", default=["genni", "uniform"])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--work", default=None, help="Keep the runs here.")
    parser.add_argument("--name", default="leakage")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="leakage_")
    os.makedirs(work, exist_ok=True)
    splits = {
        "leave-one-out": {},
        "time": dict(
            split="time", test_days=args.test_days, valid_days=args.valid_days
        ),
    }
    stats = {}
    for split, extra in splits.items():
        data = os.path.join(work, "data_" + split.split("-")[0])
        stats[split] = preprocess.preprocess(
            PreprocessConfig(args.input, data, overwrite=True, **extra)
        )
    runs = []
    for seed in args.seeds:
        for split in splits:
            for sampler in args.samplers:
                data = os.path.join(work, "data_" + split.split("-")[0])
                output = os.path.join(work, f"{split.split('-')[0]}_{sampler}_{seed}")
                shutil.rmtree(output, ignore_errors=True)
                config = TrainConfig.of(
                    data=data,
                    output=output,
                    **dict(preset("recommended"), epochs=args.epochs, seed=seed),
                    sampler=sampler,
                )
                start = time.perf_counter()
                result = train.train(config, verbose=0)
                run = {
                    "split": split,
                    "sampler": sampler,
                    "seed": seed,
                    "best_epoch": result["best_epoch"],
                    "epochs_run": result["epochs_run"],
                    "train_seconds": round(time.perf_counter() - start, 1),
                    "valid": {k: result["valid"][k] for k in METRICS},
                    "test": {k: result["test"][k] for k in METRICS},
                }
                runs.append(run)
                print(run, flush=True)
    _, _, events = cases.read_log(args.input)
    leak = future_share(events)
    command = (
        f"python benchmarks/leakage.py --input {os.path.relpath(args.input)} "
        f"--test-days {args.test_days:g} --valid-days {args.valid_days:g} "
        f"--samplers {' '.join(args.samplers)} --epochs {args.epochs} "
        f"--seeds {' '.join(map(str, args.seeds))}"
    )
    write_results(
        args.name,
        {
            "command": command,
            "machine": machine(),
            "leak": leak,
            "time_split": stats["time"].get("time_split"),
            "runs": runs,
        },
        report(command, args, runs, leak, stats),
    )


def _mean(runs, split, sampler, part, metric) -> float:
    values = [
        r[part][metric] for r in runs if r["split"] == split and r["sampler"] == sampler
    ]
    return sum(values) / len(values)


def report(command, args, runs, leak, stats) -> str:
    time_split = stats["time"]["time_split"]
    lines = [
        f"# Leave-one-out against the split by time ({os.path.basename(args.input)})",
        "",
        f"`{command}`",
        "",
        f"The split by time: validation from {time_split['valid_cutoff']}, test from "
        f"{time_split['test_cutoff']} ({time_split['test_cases']:,} test cases, "
        f"{100 * time_split['test_new_item_share']:.1f}% of them new items, "
        "misses). Leave-one-out: each user's last event the test case "
        f"({stats['leave-one-out']['users']:,} cases). Recommended preset, "
        "early stopping as `genni train`; metrics in %, at the best validation "
        f"epoch, the mean of seeds {', '.join(map(str, args.seeds))}.",
        "",
        "Under leave-one-out, a test case's future holds on average "
        f"{100 * leak['mean_training_share_after_test']:.1f}% of the training "
        f"events, and {100 * leak['test_cases_with_later_training']:.1f}% of the "
        "test cases have a training event after them (raw log).",
        "",
        "| split | sampler | best epoch | valid NDCG@10 | test HR@10 | test NDCG@10 "
        "| train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['split']} | {r['sampler']} (seed {r['seed']}) | {r['best_epoch']} | "
            f"{r['valid']['NDCG@10']:.2f} | {r['test']['HR@10']:.2f} | "
            f"{r['test']['NDCG@10']:.2f} | {r['train_seconds']:.0f} |"
        )
    lines += [
        "",
        "| split | "
        + " | ".join(f"{s} test NDCG@10" for s in args.samplers)
        + f" | {args.samplers[0]} / {args.samplers[-1]} |",
        "|---|" + "---|" * (len(args.samplers) + 1),
    ]
    for split in ("leave-one-out", "time"):
        means = [_mean(runs, split, s, "test", "NDCG@10") for s in args.samplers]
        lines.append(
            f"| {split} | "
            + " | ".join(f"{m:.2f}" for m in means)
            + f" | {means[0] / means[-1]:.3f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

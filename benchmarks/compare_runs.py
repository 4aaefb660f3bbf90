"""Runs of `genni train` side by side: what differs, validation and test.

For settings explored outside the fixed variants of `reproduce.py` (alpha,
k, layers, ...), on one dataset. A finished run shows its test metrics at the
best validation epoch; a run still going (or stopped) shows its best
validation NDCG@10 so far and the epoch it reached, and no test numbers.

    python benchmarks/compare_runs.py RUN_DIR [RUN_DIR ...] --name toys_levers \
        [--title "Toys: levers tried"]
"""

from __future__ import annotations

import argparse
import os
import sys

from _common import machine, write_results

from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig
from research.commands import relative, shell_line
from research.paper import METRICS as TEST_METRICS

# Settings that never change what a run learns, left out of the comparison.
IGNORED = {"data", "output", "epochs", "patience"}


def load(run_dir: str) -> dict:
    """A run's config and progress, finished or not."""
    # Through TrainConfig: settings added after a run started get their defaults.
    saved = rundir.read_json(os.path.join(run_dir, rundir.CONFIG_FILE))
    config = TrainConfig.from_dict(saved).to_dict()
    metrics_path = os.path.join(run_dir, "metrics.json")
    if os.path.exists(metrics_path):
        metrics = rundir.read_json(metrics_path)
        history = metrics.get("history", [])
        finished = True
        test = metrics["test"]
    else:
        state_path = os.path.join(run_dir, rundir.STATE_FILE)
        history = (
            rundir.read_json(state_path)["history"]
            if os.path.exists(state_path)
            else []
        )
        finished = False
        test = None
    scored = [r for r in history if "valid" in r]
    best = max(scored, key=lambda r: r["valid"]["NDCG@10"], default=None)
    if finished and (best is None or "HR@10" not in best["valid"]):
        # Restored from an archive: its history keeps valid NDCG@10 only.
        best = {"epoch": metrics["best_epoch"], "valid": metrics.get("valid", {})}
    return {
        "run": os.path.basename(os.path.normpath(run_dir)),
        "config": config,
        "finished": finished,
        "epochs": metrics.get("epochs_run", len(history)) if finished else len(history),
        "best_epoch": best["epoch"] if best else None,
        "best_valid_ndcg10": best["valid"].get("NDCG@10") if best else None,
        "best_valid_hr10": best["valid"].get("HR@10") if best else None,
        "test": test,
    }


def differing(runs: list[dict]) -> list[str]:
    """The settings whose values are not the same in every run."""
    keys = sorted({k for r in runs for k in r["config"]} - IGNORED)
    return [k for k in keys if len({repr(r["config"].get(k)) for r in runs}) > 1]


def _value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown(runs: list[dict], title: str, command: str) -> str:
    keys = differing(runs)
    head = ["run", *keys, "status", "best valid NDCG@10 (epoch)", "valid HR@10"]
    head += [f"test {name}" for name in TEST_METRICS]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for r in runs:
        status = (
            f"finished, {r['epochs']} epochs"
            if r["finished"]
            else f"not finished, {r['epochs']} epochs"
        )
        best = (
            f"{r['best_valid_ndcg10']:.2f} ({r['best_epoch']})"
            if r["best_valid_ndcg10"] is not None
            else "-"
        )
        hr = f"{r['best_valid_hr10']:.2f}" if r["best_valid_hr10"] is not None else "-"
        test = (
            [f"{r['test'][name]:.2f}" for name in TEST_METRICS]
            if r["test"]
            else ["-"] * len(TEST_METRICS)
        )
        cells = [
            r["run"],
            *(_value(r["config"].get(k)) for k in keys),
            status,
            best,
            hr,
        ]
        lines.append("| " + " | ".join(cells + test) + " |")
    lines += [
        "",
        "Metrics in %. Test numbers only for finished runs (at the best validation "
        "epoch); an unfinished run shows its best validation epoch so far.",
        "",
        f"Command: `{command}`",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="Run directories of `genni train`.")
    parser.add_argument("--name", required=True, help="Results file name.")
    parser.add_argument("--title", default=None, help="Heading of the table.")
    args = parser.parse_args(argv)
    missing = [r for r in args.runs if not rundir.started(r)]
    if missing:
        print(f"Not runs of `genni train`: {', '.join(missing)}", file=sys.stderr)
        return 2
    runs = [load(r) for r in args.runs]
    words = ["python", "benchmarks/compare_runs.py", *map(relative, args.runs)]
    command = shell_line([*words, "--name", args.name])
    text = markdown(runs, args.title or args.name, command)
    print(text)
    write_results(
        args.name,
        {"runs": runs, "differing": differing(runs), "machine": machine()},
        text,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

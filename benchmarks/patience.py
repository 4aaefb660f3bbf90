"""What a shorter early-stopping patience costs, from recorded validation curves.

Every run of the project's record (`benchmarks/results/runs.jsonl`) that went
to its stop with patience 40 keeps its validation NDCG@10 per epoch; run
directories (`genni train` outputs, `--runs`) give theirs from state.json. A
patience P below 40 is replayed on each curve: the run would have stopped at
the first epoch P epochs after its best so far, keeping that best. The cost is
the validation NDCG@10 lost against the full curve's best (the test metric of
an epoch that was not the best is not recorded, so validation stands in for
it), the gain the epochs not run. Grouped by preset (the recommended one:
sampled softmax with 64 GenNi negatives; the paper's: BCE with one) and data.

    python benchmarks/patience.py [--runs DIR ...] [--patience 10 15 20 30 40]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

from _common import RESULTS, write_results

from genni.pipeline.training.config import PRESETS

RECORD = RESULTS / "runs.jsonl"
RECORDED_PATIENCE = 40
DATASETS = {22363: "Beauty", 19412: "Toys", 943: "ml-100k"}


def preset_of(config: dict) -> str | None:
    """The preset a run's settings are (None: neither)."""
    if config.get("sampler") != "genni":
        return None
    if config.get("loss") == "sampled_softmax" and config.get("num_negatives") == 64:
        return "recommended"
    if config.get("loss") == "bce" and config.get("num_negatives") == 1:
        return "paper"
    return None


def stop(curve: list[float], patience: int) -> tuple[int, int]:
    """(epochs run, best epoch) of early stopping with `patience` on `curve`
    (1-based epochs; the first of equal bests wins, as in training)."""
    best, best_epoch = None, 0
    for epoch, value in enumerate(curve, 1):
        if best is None or value > best:
            best, best_epoch = value, epoch
        elif epoch - best_epoch >= patience:
            return epoch, best_epoch
    return len(curve), best_epoch


def recorded_curves(path) -> list[dict]:
    runs = []
    with open(path) as f:
        for line in f:
            run = json.loads(line)
            curve = (run.get("per_epoch") or {}).get("valid_ndcg10")
            config = run.get("config", {})
            preset = preset_of(config)
            users = json.loads(run["dataset"]).get("users")
            if not curve or preset is None or users not in DATASETS:
                continue
            if config.get("patience") != RECORDED_PATIENCE:
                continue
            if config.get("alpha") != PRESETS[preset]["alpha"]:
                continue  # The paper's alpha sweeps: not the presets' settings.
            ended = stop(curve, RECORDED_PATIENCE)[0] == len(curve)
            if not ended and len(curve) < config.get("epochs", 200):
                continue  # Cut short by hand: not a complete curve.
            runs.append(
                dict(name=run["name"], preset=preset, data=DATASETS[users], curve=curve)
            )
    return runs


def directory_curves(patterns: list[str]) -> list[dict]:
    runs = []
    for pattern in patterns:
        for run in sorted(glob.glob(pattern)):
            state_path = os.path.join(run, "state.json")
            config_path = os.path.join(run, "config.json")
            if not (os.path.exists(state_path) and os.path.exists(config_path)):
                continue
            with open(state_path) as f:
                state = json.load(f)
            with open(config_path) as f:
                config = json.load(f)
            with open(os.path.join(config["data"], "stats.json")) as f:
                users = json.load(f)["users"]
            curve = [r["valid"]["NDCG@10"] for r in state["history"] if "valid" in r]
            preset = preset_of(config)
            if preset is None or len(curve) < len(state["history"]):
                continue
            data = DATASETS.get(users, f"{users} users")
            runs.append(dict(name=run, preset=preset, data=data, curve=curve))
    return runs


def replay(runs: list[dict], patiences: list[int]) -> list[dict]:
    rows = []
    for run in runs:
        curve = run["curve"]
        full_best = max(curve)
        for p in patiences:
            ran, best_epoch = stop(curve, p)
            rows.append(
                dict(
                    name=run["name"],
                    preset=run["preset"],
                    data=run["data"],
                    patience=p,
                    epochs_run=ran,
                    best_epoch=best_epoch,
                    valid_lost=full_best - curve[best_epoch - 1],
                )
            )
    return rows


def summary(rows: list[dict], patiences: list[int]) -> list[dict]:
    groups = sorted({(r["preset"], r["data"]) for r in rows})
    out = []
    for preset, data in groups:
        for p in patiences:
            these = [
                r
                for r in rows
                if (r["preset"], r["data"], r["patience"]) == (preset, data, p)
            ]
            base = [
                r
                for r in rows
                if (r["preset"], r["data"], r["patience"])
                == (preset, data, max(patiences))
            ]
            run_epochs = sum(r["epochs_run"] for r in these)
            out.append(
                dict(
                    preset=preset,
                    data=data,
                    patience=p,
                    runs=len(these),
                    mean_lost=statistics.mean(r["valid_lost"] for r in these),
                    max_lost=max(r["valid_lost"] for r in these),
                    stopped_before_best=sum(r["valid_lost"] > 0 for r in these),
                    epochs_share=run_epochs / sum(r["epochs_run"] for r in base),
                )
            )
    return out


def markdown(table: list[dict], command: str) -> str:
    lines = [
        "# Early-stopping patience, replayed on recorded validation curves",
        "",
        "Validation NDCG@10 (%) lost against the full curve's best, when training "
        "stops after P epochs without a better one; the epochs run as a share of "
        f"patience {RECORDED_PATIENCE}'s.",
        "",
        "| preset | data | P | runs | mean lost | most lost | runs that lost "
        "| epochs run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['preset']} | {r['data']} | {r['patience']} | {r['runs']} | "
            f"{r['mean_lost']:.3f} | {r['max_lost']:.3f} | "
            f"{r['stopped_before_best']} | {100 * r['epochs_share']:.0f}% |"
        )
    lines += ["", f"Command: `{command}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", default=str(RECORD))
    parser.add_argument(
        "--runs",
        nargs="*",
        default=[],
        help="Run directories (globs) of complete curves, e.g. runs ended by "
        "--patience 200 --epochs 200.",
    )
    parser.add_argument(
        "--patience", type=int, nargs="+", default=[5, 10, 15, 20, 25, 30, 40]
    )
    parser.add_argument("--name", default="patience")
    args = parser.parse_args(argv)
    runs = recorded_curves(args.record) + directory_curves(args.runs)
    rows = replay(runs, sorted(args.patience))
    table = summary(rows, sorted(args.patience))
    command = "python benchmarks/patience.py " + " ".join(
        ["--runs", *args.runs] if args.runs else []
    )
    write_results(
        args.name,
        {"summary": table, "runs": rows},
        markdown(table, command.strip()),
    )
    print(markdown(table, command.strip()))


if __name__ == "__main__":
    main()

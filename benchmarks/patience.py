"""What an early-stopping rule costs, replayed on recorded validation curves.

Every run of the project's record (`benchmarks/results/runs.jsonl`) that went
to its stop with patience 40 or more keeps its validation NDCG@10 per epoch; run
directories (`genni train` outputs, `--runs`) give theirs from state.json. A
patience P below 40 is replayed on each curve: the run would have stopped at
the first epoch P epochs after its best so far, keeping that best; a rule
"P/G" waits max(P, G x the best epoch) epochs instead (`--patience-growth`),
so a run that took long to reach its best waits as long again. The cost is
the validation NDCG@10 lost against the full curve's best (the test metric of
an epoch that was not the best is not recorded, so validation stands in for
it), the gain the epochs not run. Grouped by preset (the recommended one:
sampled softmax with 64 GenNi negatives; the paper's: BCE with one) and data.

    python benchmarks/patience.py [--runs DIR ...] [--rules 10 20 40 10/0.5]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics

from _common import RESULTS, write_results

from genni.pipeline.training import rundir
from genni.pipeline.training.callbacks import patience_limit
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


def parse_rule(rule: str) -> tuple[int, float]:
    """ "P" or "P/G": (patience, growth)."""
    patience, _, growth = rule.partition("/")
    return int(patience), float(growth or 0)


def stop(curve: list[float], patience: int, growth: float = 0.0) -> tuple[int, int]:
    """(epochs run, best epoch) of early stopping on `curve`: after
    max(patience, growth x best epoch) epochs without a better value (1-based
    epochs; the first of equal bests wins), as `genni train` stops."""
    best, best_epoch = None, 0
    for epoch, value in enumerate(curve, 1):
        if best is None or value > best:
            best, best_epoch = value, epoch
        elif epoch - best_epoch >= patience_limit(patience, growth, best_epoch):
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
            if config.get("patience", 0) < RECORDED_PATIENCE:
                continue  # Too short a curve to replay patience 40 on.
            if config.get("alpha") != PRESETS[preset]["alpha"]:
                continue  # The paper's alpha sweeps: not the presets' settings.
            ended = stop(curve, config["patience"])[0] == len(curve)
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
            state_path = os.path.join(run, rundir.STATE_FILE)
            config_path = os.path.join(run, rundir.CONFIG_FILE)
            if not (os.path.exists(state_path) and os.path.exists(config_path)):
                continue
            state = rundir.read_json(state_path)
            config = rundir.read_json(config_path)
            users = _users(config["data"], run)
            curve = [r["valid"]["NDCG@10"] for r in state["history"] if "valid" in r]
            preset = preset_of(config)
            if preset is None or len(curve) < len(state["history"]):
                continue
            data = DATASETS.get(users, f"{users} users")
            runs.append(dict(name=run, preset=preset, data=data, curve=curve))
    return runs


def _users(data: str, run: str) -> int | None:
    """Users of a run's dataset: `data` as given, else relative to a folder
    above the run (a relative path is the one `genni train` was given)."""
    for base in ("", *(os.path.join(run, *[".."] * n) for n in (1, 2, 3))):
        path = os.path.join(base, data, "stats.json")
        if os.path.exists(path):
            return rundir.read_json(path)["users"]
    return None


def replay(runs: list[dict], rules: list[str]) -> list[dict]:
    rows = []
    for run in runs:
        curve = run["curve"]
        full_best = max(curve)
        for p in rules:
            ran, best_epoch = stop(curve, *parse_rule(p))
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


def summary(rows: list[dict], patiences: list[str]) -> list[dict]:
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
                == (preset, data, str(RECORDED_PATIENCE))
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
        "stops after P epochs without a better one (P/G: max(P, G x best epoch)); "
        f"the epochs run as a share of patience {RECORDED_PATIENCE}'s. Runs that "
        "reached their last epoch (200) never stopped: their curve may have "
        "climbed further.",
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
        "--rules",
        nargs="+",
        default=["10", "20", "30", "40", "10/0.5", "15/0.5", "20/0.5", "10/0.33"],
        help='Patience P, or "P/G" for max(P, G x best epoch); 40 must be one.',
    )
    parser.add_argument("--name", default="patience")
    args = parser.parse_args(argv)
    runs = recorded_curves(args.record) + directory_curves(args.runs)
    if str(RECORDED_PATIENCE) not in args.rules:
        parser.error(f"--rules must hold {RECORDED_PATIENCE}, the recorded patience.")
    rows = replay(runs, args.rules)
    table = summary(rows, args.rules)
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

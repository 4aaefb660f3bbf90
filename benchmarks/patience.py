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
sampled softmax with 64 GenNi negatives; the paper's: BCE with one), encoder
and data.

A rule "P/G+S" also never stops before S optimizer steps (`--min-steps`); an
epoch is ceil(users / batch size) steps, packed or not, so the floor binds
only on small logs. As `genni train` applies it, the floor holds fresh runs
only; "P/G+S:all" holds warm-started runs too (the rule before issue 66). On
logs of under 2,000 users each run is listed with the share of its full
curve's best that each rule keeps.

Warm-started runs (`--warm-start`, the nightly loop's) are replayed in groups
of their own ("warm" in the table's start column) when their curve is
complete: it ran to its epoch cap (the floor held the loop's runs there
before issue 66) or to its stop with patience 40 or more.

    python benchmarks/patience.py [--runs DIR ...] \
        [--rules 10 20 40 10/0.5 10/0.5+1000 10/0.5+1000:all]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

from _common import DATASETS, RECORD, training_of, write_results

from genni.models.config import FIRST_ENCODER
from genni.pipeline.training import rundir
from genni.pipeline.training.callbacks import patience_limit
from genni.pipeline.training.config import PRESETS
from genni.pipeline.training.data import steps_per_epoch

RECORDED_PATIENCE = 40


def preset_of(config: dict) -> str | None:
    """The preset a run's settings are (None: neither)."""
    training = training_of(config)
    return training if training in PRESETS else None


# Logs this small are listed run by run (the issue-53 check: no run keeps
# less than 90% of its full curve's best).
SMALL_USERS = 2000


def parse_rule(rule: str, warm: bool = False) -> tuple[int, float, int]:
    """ "P", "P/G" or either "+S" or "+S:all": (patience, growth, min steps)
    for a run, warm-started or not: "+S" holds fresh runs only (as `genni
    train` does), "+S:all" warm-started ones too."""
    rule, _, floor = rule.partition("+")
    floor, _, scope = floor.partition(":")
    patience, _, growth = rule.partition("/")
    if warm and scope != "all":
        floor = ""
    return int(patience), float(growth or 0), int(floor or 0)


def stop(
    curve: list[float],
    patience: int,
    growth: float = 0.0,
    min_steps: int = 0,
    steps_per_epoch: int = 1,
) -> tuple[int, int]:
    """(epochs run, best epoch) of early stopping on `curve`: after
    max(patience, growth x best epoch) epochs without a better value, never
    before `min_steps` steps (1-based epochs; the first of equal bests wins),
    as `genni train` stops."""
    best, best_epoch = None, 0
    for epoch, value in enumerate(curve, 1):
        if best is None or value > best:
            best, best_epoch = value, epoch
        elif (
            epoch - best_epoch >= patience_limit(patience, growth, best_epoch)
            and epoch * steps_per_epoch >= min_steps
        ):
            return epoch, best_epoch
    return len(curve), best_epoch


def data_name(users: int | None) -> str:
    return DATASETS.get(users, f"{users} users")


def recorded_curves(path) -> list[dict]:
    runs = []
    with open(path) as f:
        for line in f:
            run = json.loads(line)
            curve = (run.get("per_epoch") or {}).get("valid_ndcg10")
            config = run.get("config", {})
            preset = preset_of(config)
            users = json.loads(run["dataset"]).get("users")
            if not curve or preset is None or not users or None in curve:
                continue  # (A refit has no validation: no curve.)
            capped = len(curve) >= config.get("epochs", 200)
            if config.get("warm_start") and not capped:
                continue  # A warm-started curve the patience of its time cut.
            if config.get("patience", 0) < RECORDED_PATIENCE and not capped:
                continue  # Too short a curve to replay patience 40 on.
            if config.get("alpha") != PRESETS[preset]["alpha"]:
                continue  # The paper's alpha sweeps: not the presets' settings.
            ended = stop(curve, config["patience"])[0] == len(curve)
            if not ended and not capped:
                continue  # Cut short by hand: not a complete curve.
            runs.append(_run(run["name"], preset, users, config, curve))
    return runs


def _run(name: str, preset: str, users: int | None, config: dict, curve) -> dict:
    return dict(
        name=name,
        preset=preset,
        encoder=config.get("encoder", FIRST_ENCODER),
        data=data_name(users),
        start="warm" if config.get("warm_start") else "fresh",
        users=users,
        steps_per_epoch=steps_per_epoch(users or 1, config.get("batch_size", 256)),
        curve=curve,
    )


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
            runs.append(_run(run, preset, users, config, curve))
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
            ran, best_epoch = stop(
                curve,
                *parse_rule(p, run["start"] == "warm"),
                steps_per_epoch=run["steps_per_epoch"],
            )
            rows.append(
                dict(
                    name=run["name"],
                    preset=run["preset"],
                    encoder=run["encoder"],
                    data=run["data"],
                    start=run["start"],
                    users=run["users"],
                    patience=p,
                    epochs_run=ran,
                    best_epoch=best_epoch,
                    full_best_epoch=curve.index(full_best) + 1,
                    valid_lost=full_best - curve[best_epoch - 1],
                    kept=curve[best_epoch - 1] / full_best if full_best > 0 else 1.0,
                )
            )
    return rows


RUN_FIELDS = ("name", "preset", "encoder", "data", "start", "users", "full_best_epoch")


def per_run(rows: list[dict]) -> list[dict]:
    """The replay's rows, one per run: what the run is, once, and under
    `stops` each rule's [epochs run, best epoch kept, valid NDCG@10 lost,
    share of the full best kept] (the record stays compact)."""
    runs: dict[str, dict] = {}
    for r in rows:
        run = runs.setdefault(
            r["name"],
            {k: r[k] for k in RUN_FIELDS} | {"stops": {}},
        )
        run["stops"][r["patience"]] = [
            r["epochs_run"],
            r["best_epoch"],
            round(r["valid_lost"], 4),
            round(r["kept"], 4),
        ]
    return list(runs.values())


def _group(r: dict) -> tuple:
    return r["preset"], r["encoder"], r["data"], r["start"]


def summary(rows: list[dict], patiences: list[str]) -> list[dict]:
    groups = sorted({_group(r) for r in rows})
    out = []
    for group in groups:
        preset, encoder, data, start = group
        base = [
            r
            for r in rows
            if _group(r) == group and r["patience"] == str(RECORDED_PATIENCE)
        ]
        for p in patiences:
            these = [r for r in rows if _group(r) == group and r["patience"] == p]
            run_epochs = sum(r["epochs_run"] for r in these)
            out.append(
                dict(
                    preset=preset,
                    encoder=encoder,
                    data=data,
                    start=start,
                    patience=p,
                    runs=len(these),
                    mean_lost=statistics.mean(r["valid_lost"] for r in these),
                    max_lost=max(r["valid_lost"] for r in these),
                    stopped_before_best=sum(r["valid_lost"] > 0 for r in these),
                    least_kept=min(r["kept"] for r in these),
                    epochs_share=run_epochs / sum(r["epochs_run"] for r in base),
                    mean_epochs=run_epochs / len(these),
                )
            )
    return out


def markdown(table: list[dict], command: str, rows: list[dict] = ()) -> str:
    lines = [
        "# Early-stopping patience, replayed on recorded validation curves",
        "",
        "Validation NDCG@10 (%) lost against the full curve's best, when training "
        "stops after P epochs without a better one (P/G: max(P, G x best epoch)); "
        f"the epochs run as a share of patience {RECORDED_PATIENCE}'s. Runs that "
        "reached their last epoch (200) never stopped: their curve may have "
        "climbed further.",
        "",
        "| preset | encoder | data | start | P | runs | mean lost | most lost | "
        "runs that lost | least kept | epochs run | mean epochs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['preset']} | {r['encoder']} | {r['data']} | {r['start']} | "
            f"{r['patience']} | {r['runs']} | {r['mean_lost']:.3f} | "
            f"{r['max_lost']:.3f} | {r['stopped_before_best']} | "
            f"{100 * r['least_kept']:.0f}% | {100 * r['epochs_share']:.0f}% | "
            f"{r['mean_epochs']:.0f} |"
        )
    small = [r for r in rows if r["users"] and r["users"] < SMALL_USERS]
    if small:
        rules = list(dict.fromkeys(r["patience"] for r in small))
        lines += [
            "",
            f"Logs of under {SMALL_USERS:,} users, run by run: the epoch each rule "
            "stops at and the share of the full curve's best validation NDCG@10 "
            "it keeps.",
            "",
            "| run | data | start | full best (epoch) | "
            + " | ".join(f"{p}: stop, kept" for p in rules)
            + " |",
            "|---|---|---|---|" + "---|" * len(rules),
        ]
        for name in dict.fromkeys(r["name"] for r in small):
            mine = {r["patience"]: r for r in small if r["name"] == name}
            first = next(iter(mine.values()))
            cells = [
                f"{mine[p]['epochs_run']}, {100 * mine[p]['kept']:.0f}%" for p in rules
            ]
            lines.append(
                f"| {os.path.basename(name)} | {first['data']} | {first['start']} | "
                f"{first['full_best_epoch']} | " + " | ".join(cells) + " |"
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
        default=["10", "20", "40", "10/0.5", "20/0.5", "10/0.5+1000"],
        help='Patience P, or "P/G" for max(P, G x best epoch), either with "+S" '
        "for a floor of S optimizer steps; 40 must be one.",
    )
    parser.add_argument("--name", default="patience")
    args = parser.parse_args(argv)
    runs = recorded_curves(args.record) + directory_curves(args.runs)
    if str(RECORDED_PATIENCE) not in args.rules:
        parser.error(f"--rules must hold {RECORDED_PATIENCE}, the recorded patience.")
    rows = replay(runs, args.rules)
    table = summary(rows, args.rules)
    command = "python benchmarks/patience.py " + " ".join(
        repr(a) if "*" in a else a for a in (sys.argv[1:] if argv is None else argv)
    )
    text = markdown(table, command.strip(), rows)
    write_results(
        args.name,
        {
            "stops": "per rule: [epochs run, best epoch, valid lost, kept]",
            "summary": table,
            "runs": per_run(rows),
        },
        text,
    )
    print(text)


if __name__ == "__main__":
    main()

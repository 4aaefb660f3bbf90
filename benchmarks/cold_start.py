"""Items never trained on: the item tower against today's default and the
content baseline, on the cold-start split of Beauty and Toys.

For each data set (S3-Rec sequences and their `item2attributes.json` in
`../shared/data`, or ml-100k with the genres and year of its `.item` file),
hold-out seed H and training seed S: `genni preprocess
--hold-out-items SHARE --hold-out-seed H --item-attributes ...`, then the
recommended preset trained twice the same way, without and with
`--item-tower`, and the content baseline (`pipeline/training/cold.py`) on the
same test cases. The table: HR@10 / NDCG@10 of the cases whose target was
held out, ranked over every item (cold) and among the held-out items alone
(cold among cold), of the others (warm) and of all. `--share 0` holds no
item out: the warm comparison alone (ml-100k's, with `--pack --patience 200`
as docs/encoders.md's small logs).

Runs live in `--runs` (default `benchmarks/results/.cold_start_runs`, not
committed): a finished run is read again, an unfinished one resumes, so the
benchmark can be stopped and run again. Each run is added to the project's
record (`benchmarks/results/runs.jsonl`) as soon as it finishes, and a run the
record holds (the same settings, batch layout and dataset) is read from it, not
trained again: a new machine, or a deleted `--runs`, loses no finished run.

    python benchmarks/cold_start.py [--data beauty toys ml100k] [--share 0.1] \\
        [--hold-out-seeds 0 1] [--seeds 0 1] [--variants default tower] \\
        [--epochs 200] [--patience N] [--pack] [--name cold_start]
"""

from __future__ import annotations

import argparse
import os
import sys

from _common import RECORD, RESULTS, SHARED_DATA, machine, write_results

from genni.components import schema
from genni.pipeline.training import keys, rundir, train
from genni.pipeline.training.config import TrainConfig, settings_with_preset
from research import records

DATA = {
    "beauty": ("Beauty.txt", "Beauty_item2attributes.json"),
    "toys": ("Toys_and_Games.txt", "Toys_and_Games_item2attributes.json"),
    # Genres and release year (RecBole's atomic files; real timestamps).
    "ml100k": ("ml-100k.inter", "ml-100k.item"),
}
# "default": the ID rows alone (the recommended preset's before the tower
# became its default where a dataset has attributes); the run names keep it.
VARIANTS = {"default": {"item_tower": False}, "tower": {"item_tower": True}}
GROUPS = ("cold", "cold_among_cold", "warm")


def dataset(name: str, share: float, seed: int, root: str) -> str:
    """The cold-start split of `name` (`share` 0: every item trained on, the
    warm comparison alone), preprocessed once (in memory)."""
    from genni.pipeline.preprocess import inmemory
    from genni.pipeline.preprocess.config import PreprocessConfig

    sequences, attributes = DATA[name]
    out = os.path.join(root, "data", f"{name}_h{seed}" if share else f"{name}_all")
    if not os.path.exists(os.path.join(out, schema.STATS_FILE)):
        inmemory.run(
            PreprocessConfig(
                input=str(SHARED_DATA / sequences),
                output=out,
                item_attributes=str(SHARED_DATA / attributes),
                hold_out_items=share,
                hold_out_seed=seed,
                overwrite=True,
            )
        )
    return out


def run(
    data: str, output: str, seed: int, variant: str, settings: dict, kept: dict
) -> dict:
    """The run's metrics.json: read when finished, or from the record `kept`
    (`records.archived_runs`) where it holds the run, else trained (resumed)
    and added to the record at once."""
    path = os.path.join(output, rundir.METRICS_FILE)
    if os.path.exists(path):
        return rundir.read_json(path)
    # `genni train`'s defaults: the recommended preset under the variant.
    values = dict(data=data, output=output, seed=seed, **settings)
    config = TrainConfig.of(**settings_with_preset(values | VARIANTS[variant]))
    key = keys.run_key(config, keys.data_fingerprint(data))
    # The key leaves the batch layout out; the table compares runs trained alike.
    if key in kept and kept[key][1]["config"].get("pack") == config.pack:
        print(f"{output}: finished before, read from the record", flush=True)
        return kept[key][1]
    print(f"training {output}", flush=True)
    # One line an epoch and its validation (Keras verbose 2): progress in a log.
    metrics = train.train(config, resume=rundir.started(output), verbose=2)
    records.archive_runs({output: metrics}, str(RECORD), "cold_start", kept)
    return metrics


def row(name: str, hold: int, seed: int, variant: str, metrics: dict) -> dict:
    by = metrics.get("test_by_target", {})
    out = dict(data=name, hold_out_seed=hold, seed=seed, model=variant)
    out["valid NDCG@10"] = metrics.get("valid", {}).get("NDCG@10")
    for group in GROUPS:
        for metric in ("HR@10", "NDCG@10"):
            out[f"{group} {metric}"] = by.get(group, {}).get(metric)
    for metric in ("HR@10", "NDCG@10"):
        out[f"all {metric}"] = metrics["test"][metric]
    out["cold cases"] = by.get("cold", {}).get("cases")
    out["best epoch"] = metrics.get("best_epoch")
    return out


def baseline_row(name: str, hold: int, metrics: dict) -> dict:
    content = metrics["test_by_target"].get("content_baseline", {})
    out = dict(data=name, hold_out_seed=hold, seed=None, model="content baseline")
    every = content.get("every_item", {})
    for metric in ("HR@10", "NDCG@10"):
        out[f"cold_among_cold {metric}"] = content.get(metric)
        out[f"cold {metric}"] = every.get(metric)
    out["cold cases"] = content.get("cases")
    return out


def markdown(rows: list[dict], command: str) -> str:
    cells = ["valid NDCG@10"]
    cells += [f"{g} {m}" for g in (*GROUPS, "all") for m in ("HR@10", "NDCG@10")]
    lines = [
        "# Items never trained on: the cold-start split",
        "",
        "Test HR@10 / NDCG@10 (%). cold: the target was held out, ranked over "
        "every item; cold among cold: among the held-out items alone; warm: the "
        "other cases; all: every case. valid: validation NDCG@10 of the best "
        "epoch (held-out items are in no validation case).",
        "",
        "| data | hold-out seed | seed | model | cases | best epoch | "
        + " | ".join(cells)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(cells),
    ]
    for r in rows:
        values = ["" if r.get(c) is None else f"{r[c]:.2f}" for c in cells]
        head = [
            r["data"],
            r["hold_out_seed"] if r.get("cold cases") else "",
            "" if r["seed"] is None else r["seed"],
            r["model"],
            r.get("cold cases") or "",
            r.get("best epoch") or "",
        ]
        lines.append("| " + " | ".join(str(c) for c in [*head, *values]) + " |")
    lines += ["", f"Command: `{command}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", default=["beauty", "toys"], choices=DATA)
    parser.add_argument(
        "--share",
        type=float,
        default=0.1,
        help="the share of items held out (0: none, the warm comparison alone)",
    )
    parser.add_argument("--hold-out-seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument(
        "--patience", type=int, help="as genni train's (default: its default)"
    )
    parser.add_argument(
        "--pack", action="store_true", help="packed batches (genni train --pack)"
    )
    parser.add_argument("--runs", default=str(RESULTS / ".cold_start_runs"))
    parser.add_argument("--name", default="cold_start")
    args = parser.parse_args(argv)
    settings = dict(epochs=args.epochs, pack=args.pack)
    if args.patience is not None:
        settings["patience"] = args.patience
    tag = ("_pack" if args.pack else "") + (
        f"_p{args.patience}" if args.patience is not None else ""
    )
    rows, kept = [], records.archived_runs(str(RECORD))
    for name in args.data:
        for hold in args.hold_out_seeds if args.share else [0]:
            data = dataset(name, args.share, hold, args.runs)
            baseline = None
            for seed in args.seeds:
                for variant in args.variants:
                    split = f"h{hold}_" if args.share else ""
                    output = os.path.join(
                        args.runs, "runs", f"{name}_{split}s{seed}_{variant}{tag}"
                    )
                    metrics = run(data, output, seed, variant, settings, kept)
                    rows.append(row(name, hold, seed, variant, metrics))
                    baseline = baseline or metrics
            if baseline and "test_by_target" in baseline:
                rows.append(baseline_row(name, hold, baseline))
    command = "python benchmarks/cold_start.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    write_results(
        args.name, {"machine": machine(), "rows": rows}, markdown(rows, command)
    )
    print(markdown(rows, command))


if __name__ == "__main__":
    main()

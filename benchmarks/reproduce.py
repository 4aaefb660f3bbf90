"""Reproduce the paper's table: uniform, popularity, GenNi and S3-Rec variants.

Each (variant, seed) trains into RUNS_DIR/<dataset>_<variant>_s<seed>
(`run_names.variant_run_name`) with `genni train` settings; a run whose metrics.json
exists is reused, a killed one resumes. Writes a Markdown table (mean +- std
over seeds, test, %) beside the paper's numbers (`paper.PAPER`), with seconds
per epoch.

    python benchmarks/reproduce.py --data DIR --dataset beauty --seeds 0 1 2 3 \\
        [--variants uniform genni ...] [--runs-dir runs] [--epochs 200] \\
        [--pack] [--name RESULTS_NAME] [--pretrain-epochs N] [--pretrain-seed S]

The s3rec variants fine-tune from `genni pretrain` runs
(RUNS_DIR/<dataset>_pretrain[<N>]_s<seed>, `run_names.pretrain_run_name`), trained
first when missing; their run names carry a pre-training other than the
default (`run_names.finetune_variant_name`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from _common import RESULTS, machine, mean_std, write_results

from genni.pipeline.training import keys, rundir, train
from genni.pipeline.training.config import DEFAULT_ALPHA_STEP, TrainConfig
from research import records, run_names
from research.commands import relative, shell_line
from research.paper import METRICS, PAPER
from research.sections import inconsistent_row_note

# GenNi's negatives under the corrected sampled softmax, k = 64, alpha 1: the
# settings of the recommended preset (`--preset recommended`) when it was chosen.
SSM_K64_A1 = dict(sampler="genni", alpha=1.0, num_negatives=64, loss="sampled_softmax")

VARIANTS = {
    "uniform": dict(sampler="uniform"),
    "popularity": dict(sampler="popularity", gamma=1.0),
    "genni": dict(sampler="genni", alpha=2.5, beta=1.0),
    "genni_beta0.1": dict(sampler="genni", alpha=2.5, beta=0.1),
    # k = 3 negatives: the paper tunes k in 1..10 (its main table's k is not
    # stated; its sensitivity study says k = 1), so no paper numbers beside it.
    "genni_k3": dict(sampler="genni", alpha=2.5, beta=1.0, num_negatives=3),
    # alpha 4 with k = 3: within the paper's search (alpha 0..6, k 1..10).
    "genni_a4_k3": dict(sampler="genni", alpha=4.0, beta=1.0, num_negatives=3),
    # alpha 6: the best validation NDCG@10 of the Beauty alpha sweep (seed 0,
    # alpha 0..6, the paper's range), 6.71 against 6.52 at alpha 2.5.
    "genni_a6": dict(sampler="genni", alpha=6.0, beta=1.0),
    "genni_growing_m20": dict(sampler="genni", alpha=2.5, beta_growth=20.0),
    # The report grid's self-adjusted run from the main alpha (reused if run).
    "genni_self_adjust": dict(
        sampler="genni", alpha=2.5, alpha_step=DEFAULT_ALPHA_STEP
    ),
    # GenNi that, like the reference uniform sampler, never draws the user's items.
    "genni_exclude_seen": dict(sampler="genni", alpha=2.5, beta=1.0, exclude_seen=True),
    # S3-Rec: `genni pretrain` (one per seed and length, or one for all seeds
    # with --pretrain-seed), then fine-tuning.
    "s3rec": dict(sampler="uniform"),
    "s3rec_genni": dict(sampler="genni", alpha=2.5, beta=1.0),
    # Beyond the paper (issue 31), one ingredient at a time: the full softmax
    # (the ceiling sampled losses approach), then GenNi's negatives under a
    # sampled softmax, k = 64, alpha 1 (GenNi's Q is then the model's own
    # softmax), without and with the log Q correction.
    "softmax": dict(loss="softmax"),
    "genni_ssm_k64_a1_nocorr": dict(SSM_K64_A1, logq_correction=False),
    "genni_ssm_k64_a1": SSM_K64_A1,
    # The same, twice as wide (d = 128).
    "genni_ssm_k64_a1_h128": dict(SSM_K64_A1, hidden_size=128),
    # S3-Rec pre-training, then the recommended preset (Beauty, 20
    # pre-training epochs of seed 0, fine-tuning seeds 0-3: test HR@10 10.02 +-
    # 0.05 / NDCG@10 6.02 +- 0.05).
    "s3rec_genni_ssm_k64_a1": SSM_K64_A1,
    # Issue 53: the FilterMix encoder (docs/encoders.md) under each loss and
    # sampler: the recommended preset's, the paper's GenNi, the full softmax.
    "filtermix_genni_ssm_k64_a1": dict(SSM_K64_A1, encoder="filtermix"),
    "filtermix_genni": dict(sampler="genni", alpha=2.5, beta=1.0, encoder="filtermix"),
    "filtermix_softmax": dict(loss="softmax", encoder="filtermix"),
}
PRETRAINED = ("s3rec", "s3rec_genni", "s3rec_genni_ssm_k64_a1")


def run_variant(
    data: str,
    runs_dir: str,
    dataset: str,
    variant: str,
    seed: int,
    epochs: int,
    patience: int,
    report_only: bool = False,
    include_running: bool = False,
    pretrain_epochs: int = run_names.DEFAULT_PRETRAIN_EPOCHS,
    pack: bool = False,
    pretrain_seed: int | None = None,
) -> dict | None:
    name = variant
    if variant in PRETRAINED:
        name = run_names.finetune_variant_name(
            variant, seed, pretrain_epochs, pretrain_seed
        )
        pretrain_seed = seed if pretrain_seed is None else pretrain_seed
    output = os.path.join(runs_dir, run_names.variant_run_name(dataset, name, seed))
    if not os.path.exists(output):
        # The same settings may have run under another name (a report grid's
        # run, packed or not, or one restored from an archive): reuse it.
        settings = dict(VARIANTS[variant], epochs=epochs, patience=patience, pack=pack)
        if variant in PRETRAINED:
            settings["init_from"] = pretrain_dir(
                runs_dir, dataset, pretrain_seed, pretrain_epochs
            )
        config = TrainConfig.of(data=data, output=output, seed=seed, **settings)
        output = finished_twin(runs_dir, config) or output
    metrics_path = os.path.join(output, train.METRICS_FILE)
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            return json.load(f) | {"run": os.path.basename(output)}
    if report_only:
        if include_running and os.path.exists(os.path.join(output, train.STATE_FILE)):
            return running_snapshot(output)
        return None
    init_from = None
    if variant in PRETRAINED:
        init_from = pretrained(data, runs_dir, dataset, pretrain_seed, pretrain_epochs)
    config = TrainConfig.of(
        data=data,
        output=output,
        seed=seed,
        epochs=epochs,
        patience=patience,
        init_from=init_from,
        pack=pack,
        **VARIANTS[variant],
    )
    print(f"Training {output}")
    resume = rundir.started(output)
    # Named, as a reused run is, so that --archive keeps it too.
    # One line an epoch and its validation (Keras verbose 2): progress in a log.
    return train.train(config, resume=resume, verbose=2) | {
        "run": os.path.basename(output)
    }


def finished_twin(runs_dir: str, config: TrainConfig) -> str | None:
    """A finished run in `runs_dir` with `config`'s settings, whatever its name."""
    key = keys.run_key(config, keys.data_fingerprint(config.data))
    found = keys.existing_runs(runs_dir).get(key)
    if found and os.path.exists(os.path.join(found[0], train.METRICS_FILE)):
        return found[0]
    return None


def pretrain_dir(runs_dir: str, dataset: str, seed: int, epochs: int) -> str:
    return os.path.join(runs_dir, run_names.pretrain_run_name(dataset, seed, epochs))


def pretrained(data: str, runs_dir: str, dataset: str, seed: int, epochs: int) -> str:
    """The S3-Rec pre-training of this seed and length (trained, or resumed if
    unfinished)."""
    from genni.pipeline.training import pretrain
    from genni.pipeline.training.config import PretrainConfig

    output = pretrain_dir(runs_dir, dataset, seed, epochs)
    state_path = os.path.join(output, pretrain.STATE_FILE)
    if os.path.exists(state_path):
        with open(state_path) as f:
            if json.load(f)["epoch"] >= epochs:
                return output
    print(f"Pre-training {output}")
    resume = rundir.started(output)
    config = PretrainConfig.of(data=data, output=output, epochs=epochs, seed=seed)
    pretrain.pretrain(config, resume=resume, verbose=0)
    return output


def running_snapshot(output: str) -> dict:
    """A run still training: its best weights so far, evaluated like metrics.json."""
    with open(os.path.join(output, train.STATE_FILE)) as f:
        state = json.load(f)
    seconds = [r["train_seconds"] for r in state["history"]]
    return {
        "valid": train.evaluate(output, None, "valid")[0],
        "test": train.evaluate(output, None, "test")[0],
        "best_epoch": state["best_epoch"],
        "epochs_run": state["epoch"],
        "seconds_per_epoch": statistics.median(seconds),
        "running": True,
    }


def command(args: argparse.Namespace) -> str:
    """This run's command line, paths relative to the working directory."""
    words = ["python", "benchmarks/reproduce.py", "--data", relative(args.data)]
    words += ["--dataset", args.dataset, "--runs-dir", relative(args.runs_dir)]
    words += ["--seeds", *map(str, args.seeds), "--variants", *args.variants]
    if set(args.variants) & set(PRETRAINED):
        if args.pretrain_epochs != run_names.DEFAULT_PRETRAIN_EPOCHS:
            words += ["--pretrain-epochs", str(args.pretrain_epochs)]
        if args.pretrain_seed is not None:
            words += ["--pretrain-seed", str(args.pretrain_seed)]
    if args.archive:
        words += ["--archive", relative(args.archive)]
    if args.pack:
        words.append("--pack")
    if args.name:
        words += ["--name", args.name]
    return shell_line(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Output of genni preprocess.")
    parser.add_argument("--dataset", default="beauty", help="Name (paper lookup).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS)
    )
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--patience", type=int, default=40)
    parser.add_argument(
        "--pretrain-epochs",
        type=int,
        default=run_names.DEFAULT_PRETRAIN_EPOCHS,
        help="S3-Rec pre-training epochs for the s3rec variants (data needs "
        "item attributes).",
    )
    parser.add_argument(
        "--pretrain-seed",
        type=int,
        default=None,
        help="Fine-tune every seed of the s3rec variants from the one "
        "pre-training of this seed (default: each seed from its own).",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="Tabulate finished runs; train none."
    )
    parser.add_argument(
        "--include-running",
        action="store_true",
        help="With --report-only: also runs still training, at their best so far.",
    )
    parser.add_argument(
        "--archive",
        default=None,
        help="A record of finished runs, one line each (e.g. "
        "benchmarks/results/runs.jsonl; a directory of their metrics.json also "
        "works): runs kept there are restored into --runs-dir instead of "
        "trained again, and finished runs are added to it.",
    )
    parser.add_argument(
        "--pack",
        action="store_true",
        help="Train on packed batches (the same model and loss, faster).",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="Results file name under benchmarks/results (default "
        "reproduce_<dataset>; e.g. beyond_<dataset> for the issue-31 ablation).",
    )
    args = parser.parse_args(argv)

    if args.archive:
        restored = records.restore_runs(args.archive, args.runs_dir, args.data)
        if restored:
            print(f"{len(restored)} finished runs restored from {args.archive}.")
    rows = {}
    finished = {}
    for variant in args.variants:
        found = [
            run_variant(
                args.data,
                args.runs_dir,
                args.dataset,
                variant,
                seed,
                args.epochs,
                args.patience,
                args.report_only,
                args.include_running,
                args.pretrain_epochs,
                args.pack,
                args.pretrain_seed,
            )
            for seed in args.seeds
        ]
        seeds = [s for s, r in zip(args.seeds, found, strict=True) if r is not None]
        results = [r for r in found if r is not None]
        finished.update(
            {
                os.path.join(args.runs_dir, r["run"]): {
                    k: v for k, v in r.items() if k != "run"
                }
                for r in results
                if "run" in r and not r.get("running")
            }
        )
        if not results:
            continue
        rows[variant] = {
            "seeds": seeds,
            "test": {m: [r["test"][m] for r in results] for m in METRICS},
            "valid_ndcg10": [r["valid"]["NDCG@10"] for r in results],
            "best_epoch": [r["best_epoch"] for r in results],
            "epochs_run": [r["epochs_run"] for r in results],
            "seconds_per_epoch": [r["seconds_per_epoch"] for r in results],
            "still_running": any(r.get("running") for r in results),
            "runs": [r.get("run") for r in results],
            "packed": [bool(r.get("config", {}).get("pack")) for r in results],
        }
    paper = PAPER.get(args.dataset, {})
    lines = [
        f"# Reproduction: {args.dataset}\n",
        f"Test metrics (%), full ranking, mean +- std over the seeds each "
        f"variant has finished (of {args.seeds}); paper numbers in brackets. "
        f"Runs in `{relative(args.runs_dir)}`. Seconds per epoch are medians of "
        "runs that often shared the machine: `benchmarks/sampler_speed.py` "
        "measures speed. A run of the same settings under another name (a "
        "`genni report` grid's) is reused; `(packed)`: trained on packed "
        "batches (`--pack`), the same model and loss.\n",
        "| variant | seeds | " + " | ".join(METRICS) + " | best epoch | s / epoch |",
        "|---|---|" + "---|" * (len(METRICS) + 2),
    ]
    for variant, row in rows.items():
        cells = []
        for m in METRICS:
            cell = mean_std(row["test"][m], "+-")
            if m in paper.get(variant, {}):
                cell += f" [{paper[variant][m]:.2f}]"
            cells.append(cell)
        epochs = "/".join(str(e) for e in row["best_epoch"])
        if row["still_running"]:
            epochs += f" (run still training, epoch {max(row['epochs_run'])})"
        seconds = statistics.median(row["seconds_per_epoch"])
        seeds = ", ".join(
            f"{s} (packed)" if packed else str(s)
            for s, packed in zip(row["seeds"], row["packed"], strict=True)
        )
        lines.append(
            f"| {variant} | {seeds} | "
            + " | ".join(cells)
            + f" | {epochs} | {seconds:.1f} |"
        )
    for variant in rows:
        if all(m in paper.get(variant, {}) for m in METRICS):
            note = inconsistent_row_note(variant, paper[variant])
            if note:
                lines.append(f"\n{note}")
    lines.append(f"\nCommand: `{command(args)}`\n")
    if args.archive:
        records.archive_runs(finished, args.archive, args.dataset)
    markdown = "\n".join(lines)
    print(markdown)
    write_results(
        args.name or f"reproduce_{args.dataset}",
        {"rows": rows, "paper": paper, "seeds": args.seeds, "machine": machine()},
        markdown,
    )
    print(f"See {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

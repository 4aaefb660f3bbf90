"""`genni train`, `pretrain`, `evaluate` and `tune`: the training commands.

The flags shared by several commands are in `train_args`.
"""

from __future__ import annotations

import argparse
import json
import os

from genni.components import schema
from genni.pipeline.cli import train_args
from genni.pipeline.training.config import ORACLES, TuneConfig
from genni.pipeline.training.summary import (
    format_by_target,
    format_metrics,
    format_table,
)


def _train(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.training import train

    config = train_args.config_from_args(args)
    result = train.train(
        config,
        resume=args.resume,
        verbose=0 if args.quiet else 1,
        strategy=train.make_strategy(args.strategy),
    )
    print(format_metrics(result))
    print(f"Metrics: {os.path.join(config.output, train.METRICS_FILE)}")
    return 0


def _pretrain(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.training import pretrain, train

    config = train_args.pretrain_config_from_args(args)
    state = pretrain.pretrain(
        config,
        resume=args.resume,
        verbose=0 if args.quiet else 1,
        strategy=train.make_strategy(args.strategy),
    )
    last = state["history"][-1] if state["history"] else {}
    print(
        f"Pre-trained {state['epoch']} epochs ({state.get('seconds_per_epoch', 0):.1f} "
        f"s/epoch); last losses: "
        + ", ".join(
            f"{k} {last[k]:.4f}"
            for k in ("loss", "aap", "mip", "map", "sp")
            if k in last
        )
    )
    print(
        f"Fine-tune: genni train --data {config.data} --output RUN_DIR "
        f"--init-from {config.output}"
    )
    return 0


def _evaluate(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.cli.serving import warn_unfinished
    from genni.pipeline.training import train

    warn_unfinished(args.run)
    metrics, repeats = train.evaluate(args.run, args.data, args.split, args.candidates)
    if args.json:
        print(json.dumps({**metrics, "repeats": repeats}, indent=2))
        return 0
    print(
        train.repeat_line(
            args.split,
            repeats["users"],
            repeats["repeat_targets"],
            repeats["candidates"],
        )
    )
    print(format_table(metrics))
    if "by_target" in repeats:
        print(format_by_target(args.split, repeats["by_target"]))
    return 0


def _tune(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.training import tune

    result = tune.tune(
        args.data,
        args.output,
        oracle=args.oracle,
        max_trials=args.max_trials,
        epochs_per_trial=args.epochs_per_trial,
        patience=args.patience,
        space=args.space,
        seed=args.seed,
        pack=args.pack,
        candidates=args.candidates or TuneConfig.defaults()["candidates"],
    )
    if result.get("worker"):
        print("Worker done: the chief writes the results table.")
        return 0
    with open(os.path.join(args.output, tune.TABLE_FILE)) as f:
        print(f.read())
    if result["trials"]:
        print(
            f"Best configuration: {os.path.join(args.output, tune.BEST_CONFIG_FILE)} "
            f"(genni train --config FILE)"
        )
    return 0


def add_train(commands) -> None:
    p = commands.add_parser(
        "train",
        help="Train a sequential recommender with uniform, popularity or GenNi "
        "negatives.",
        description="Train a sequential recommender (a TFRS retrieval model: "
        "FilterMix or SASRec) on the output of `genni preprocess`, "
        "early-stopping on validation NDCG@10, and test the best epoch. "
        "Defaults are the recommended preset (FilterMix, GenNi's negatives "
        "under a corrected sampled softmax); --preset paper is the paper's "
        "SASRec_GenNi.",
    )
    train_args.add_arguments(p)
    p.set_defaults(handler=_train)


def add_pretrain(commands) -> None:
    p = commands.add_parser(
        "pretrain",
        help="S3-Rec pre-training with item attributes (then `train --init-from`).",
        description="Pre-train the SASRec encoder with S3-Rec's four "
        "self-supervised objectives (associated attribute, masked item, masked "
        "attribute and segment prediction) over the item attributes written by "
        "`genni preprocess --item-attributes` (S3-Rec, Amazon or Yelp metadata); "
        "fine-tune with `genni train --init-from PRETRAIN_DIR` and any sampler.",
    )
    train_args.add_pretrain_arguments(p)
    p.set_defaults(handler=_pretrain)


def add_evaluate(commands) -> None:
    p = commands.add_parser(
        "evaluate", help="Full-ranking metrics of a trained run on a split."
    )
    p.add_argument("--run", required=True, help="Run directory of `genni train`.")
    p.add_argument("--data", default=None, help="Dataset (default: the run's).")
    p.add_argument("--split", default=schema.TEST, choices=schema.SPLITS[1:])
    train_args.add_candidates_argument(p, "default: the run's")
    p.add_argument("--json", action="store_true", help="Print JSON.")
    p.set_defaults(handler=_evaluate)


def add_tune(commands) -> None:
    p = commands.add_parser(
        "tune",
        help="Hyperparameter search with keras-tuner (objective: valid NDCG@10).",
        description="Search sampler, alpha, beta, k, self-adjusted alpha, learning "
        "rate, d, layers, heads and dropout with keras-tuner; each trial is a `genni "
        "train` run. Re-running the command continues the search. Distributed: "
        "start one chief and N workers with KERASTUNER_TUNER_ID (chief, tuner0, "
        "...), KERASTUNER_ORACLE_IP and KERASTUNER_ORACLE_PORT set.",
    )
    defaults = TuneConfig.defaults()  # The search's settings are its.
    p.add_argument("--data", required=True, help="Output of `genni preprocess`.")
    p.add_argument("--output", required=True, help="Search directory.")
    p.add_argument("--oracle", default=defaults["oracle"], choices=ORACLES)
    p.add_argument("--max-trials", type=int, default=defaults["max_trials"])
    p.add_argument("--epochs-per-trial", type=int, default=defaults["epochs_per_trial"])
    p.add_argument("--patience", type=int, default=defaults["patience"])
    p.add_argument(
        "--space", default=None, help="JSON/YAML file replacing space entries."
    )
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument(
        "--pack",
        action="store_true",
        help="Train the trials on packed batches (`genni train --pack`: the same "
        "model and loss, several times faster on short sequences). The best "
        "configuration leaves it out: add --pack to `genni train` yourself.",
    )
    train_args.add_candidates_argument(p, "default new")
    p.set_defaults(handler=_tune)

"""The `genni` command line.

    genni synth --output log.json.gz            # a synthetic review log
    genni preprocess --input 'logs/*.json.gz' --output data/
    genni stats data/                           # the dataset table again

`genni preprocess` passes every flag it does not know to Apache Beam, so any
runner works: `--runner=DataflowRunner --project=P --region=R
--temp_location=gs://B/tmp --setup_file=./setup.py`, or `--runner=FlinkRunner
--flink_master=HOST:8081 --environment_type=LOOPBACK`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from genni.components import schema
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess import outputs, synthetic

_LOG = logging.getLogger("genni")

EXIT_USAGE = 2
REPORT_DATASETS = ("beauty", "toys")  # Those with the paper's numbers.


def format_stats(stats: dict) -> str:
    """The dataset table and what each filter removed, for people."""
    kcore = stats["kcore"]
    rows = [
        ("format", stats["format"]),
        ("lines read", f"{stats['lines_read']:,}"),
        ("malformed lines (dead letter)", f"{stats['malformed_lines']:,}"),
        ("events dropped by rating", f"{stats['dropped_by_rating']:,}"),
        ("duplicate events dropped", f"{stats['duplicate_events']:,}"),
        (
            f"{stats['min_count']}-core removed",
            f"{kcore['users_removed']:,} users, {kcore['items_removed']:,} items, "
            f"{kcore['events_removed']:,} events in {kcore['rounds']} rounds",
        ),
        ("users", f"{stats['users']:,}"),
        ("items", f"{stats['items']:,}"),
        ("events", f"{stats['events']:,}"),
        ("avg length", f"{stats['avg_length']:.2f}"),
        ("sparsity", f"{100 * stats['sparsity']:.2f}%"),
        (
            "examples train/valid/test",
            "/".join(f"{stats['examples'][s]:,}" for s in schema.SPLITS),
        ),
    ]
    repeats = stats.get("repeats")
    if repeats:
        rows.append(
            (
                "repeated items",
                f"{100 * repeats['event_share']:.1f}% of events; targets that "
                f"repeat an earlier item: valid {repeats['valid_targets']:,} "
                f"({100 * repeats['valid_share']:.1f}%), test "
                f"{repeats['test_targets']:,} ({100 * repeats['test_share']:.1f}%)",
            )
        )
    attributes = stats.get("item_attributes")
    if attributes:
        rows.append(
            (
                "item attributes",
                f"{attributes['attributes']:,} attributes, "
                f"{attributes['items_with_attributes']:,} items with some, "
                f"{attributes['items_without_attributes']:,} without, "
                f"{attributes.get('malformed_metadata_lines', 0):,} unreadable "
                "metadata lines",
            )
        )
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)


def _preprocess(args: argparse.Namespace, beam_args: list[str]) -> int:
    config = preprocess.config_from_args(args)
    print(f"Preprocessing {config.input} -> {config.output} (Apache Beam)", flush=True)
    start = time.perf_counter()
    stats = preprocess.preprocess(config, beam_args)
    print(f"Done in {time.perf_counter() - start:.1f} s.")
    print(format_stats(stats))
    if stats["malformed_lines"]:
        print(
            f"{stats['malformed_lines']:,} malformed lines set aside in "
            f"{os.path.join(config.output, schema.DEAD_LETTER_DIR)}/"
        )
    return 0


def _synth(args: argparse.Namespace, extra: list[str]) -> int:
    n = synthetic.write_log(synthetic.config_from_args(args), args.output)
    print(f"Wrote {n:,} review lines to {args.output}")
    return 0


def _stats(args: argparse.Namespace, extra: list[str]) -> int:
    path = os.path.join(args.data, schema.STATS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: run `genni preprocess` first.")
    stats = outputs.read_json(path)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def _train(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.cli import train_args
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
    from genni.pipeline.cli import train_args
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


def _report(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.reproduce import report

    command = report.command_line(args)  # Shell-quoted, relative paths.
    report.report(
        args.data,
        args.output,
        runs_dir=args.runs_dir,
        quick=args.quick,
        seeds=args.seeds,
        dataset=args.paper,
        commands=[command],
        report_only=args.report_only,
        pack=args.pack,
        archive=args.archive,
    )
    return 0


def _evaluate(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.training import train

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
    return 0


def _export(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import export

    path = export.export(
        args.run, args.output, args.version, args.k, args.data, args.candidates
    )
    print(f"Exported {args.run} to {path}")
    return 0


def _serve(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import server as serving

    server = serving.Server(
        args.model_base_path,
        name=args.model_name,
        host=args.host,
        rest_port=args.rest_port,
        grpc_port=args.grpc_port,
    ).start()
    for version, why in sorted(server.repository.refused.items()):
        print(f"Skipped version {version}: {why}", file=sys.stderr)
    print(
        f"Serving {args.model_name} version {server.repository.served.version} "
        f"from {args.model_base_path}: REST "
        f"http://{args.host}:{server.rest_port}/v1/models/{args.model_name}, gRPC "
        f"{args.host}:{server.grpc_port}. Ctrl-C stops.",
        flush=True,
    )
    server.wait()
    return 0


def _recommend(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import client

    if bool(args.server) == bool(args.model_base_path):
        raise ValueError("Pass exactly one of --server URL or --model-base-path P.")
    if args.server:
        result = client.recommend_rest(
            args.server, args.model_name, args.history, args.k
        )
    else:
        result = client.recommend_local(args.model_base_path, args.history, args.k)
    for rank, (item, score) in enumerate(zip(*result, strict=True), start=1):
        print(f"{rank:3d}. {item}  {score:.4f}")
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
        space_file=args.space,
        seed=args.seed,
        pack=args.pack,
        candidates=args.candidates or "new",
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


def format_table(metrics: dict) -> str:
    names = [n for n in metrics if n != "MRR"] + ["MRR"]
    return "  " + "  ".join(f"{n} {metrics[n]:.2f}" for n in names)


def format_metrics(result: dict) -> str:
    from genni.pipeline.training import train

    lines = [
        f"Best epoch {result['best_epoch']} of {result['epochs_run']} "
        f"({result['seconds_per_epoch']:.1f} s per epoch)",
        f"valid (%):\n{format_table(result['valid'])}",
        f"test (%):\n{format_table(result['test'])}",
    ]
    repeats = result.get("repeats", {}).get(schema.TEST)
    if repeats:
        lines.append(
            train.repeat_line(
                schema.TEST,
                repeats["users"],
                repeats["repeat_targets"],
                repeats["candidates"],
            )
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genni",
        description="GenNi: sequential recommendation trained with model-generated "
        "negatives, from raw review logs to a served endpoint.",
        epilog="Run `genni COMMAND --help` for the flags of a command.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="Log at INFO (Beam included)."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = commands.add_parser(
        "preprocess",
        help="Review logs -> TFRecords of padded sequences (Apache Beam).",
        description="Turn review logs (Amazon 2014/2018 or 2023, Yelp, ratings CSV, "
        "S3-Rec sequence text; plain or gzip) into leave-one-out TFRecords, "
        "vocabularies and dataset statistics. Flags not listed here go to Apache "
        "Beam (e.g. --runner, --direct_num_workers).",
    )
    preprocess.add_arguments(p)
    p.set_defaults(handler=_preprocess)

    p = commands.add_parser(
        "synth",
        help="Write a synthetic review log with a planted sequential signal.",
        description=synthetic.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    synthetic.add_arguments(p)
    p.set_defaults(handler=_synth)

    from genni.pipeline.cli import train_args

    p = commands.add_parser(
        "train",
        help="Train SASRec with uniform, popularity or GenNi negatives.",
        description="Train SASRec (TFRS retrieval model) on the output of `genni "
        "preprocess`, early-stopping on validation NDCG@10, and test the best "
        "epoch. Defaults are the paper's SASRec_GenNi.",
    )
    train_args.add_arguments(p)
    p.set_defaults(handler=_train)

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

    p = commands.add_parser(
        "report",
        help="The paper's tables and plots regenerated on a dataset.",
        description="Run (or reuse) the grid of `genni train` runs behind the "
        "paper's tables and figures and write REPORT_DIR/report.md with PNG plots: "
        "main and efficiency tables, alpha / beta / k sweeps, BPR with 1..8 "
        "negatives, valid NDCG@10 vs time, self-adjusted alpha, a case study, and "
        "each claim marked reproduced or not. Finished runs are never retrained; "
        "an interrupted grid resumes; report processes sharing one --runs-dir "
        "(each with its own --output) each take the next run no other one is "
        "training.",
    )
    p.add_argument("--data", required=True, help="Output of `genni preprocess`.")
    p.add_argument("--output", required=True, help="Report directory.")
    p.add_argument(
        "--runs-dir", default=None, help="Where runs live (default REPORT_DIR/runs)."
    )
    p.add_argument("--seeds", type=int, default=None, help="Seeds 0..N-1 (full: 4).")
    p.add_argument(
        "--quick", action="store_true", help="Reduced grid: 3 epochs, one seed."
    )
    p.add_argument(
        "--archive",
        default=None,
        help="A record of finished runs, one line each (small enough to "
        "commit, e.g. benchmarks/results/runs.jsonl; .jsonl is added to a new "
        "name; a directory of their metrics.json also works): runs kept there "
        "are restored into --runs-dir instead of trained again, and each run "
        "that finishes is added to it.",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="Train nothing: render from the runs that have finished (the "
        "case study, which trains after the grid, waits for a run without it).",
    )
    p.add_argument(
        "--pack",
        action="store_true",
        help="Train the runs still missing on packed batches (`genni train "
        "--pack`: the same model and loss, several times faster on short "
        "sequences). Finished runs are reused whether packed or not.",
    )
    p.add_argument(
        "--paper",
        choices=REPORT_DATASETS,
        default=None,
        help="Put the paper's numbers for this dataset beside ours.",
    )
    p.set_defaults(handler=_report)

    p = commands.add_parser(
        "evaluate", help="Full-ranking metrics of a trained run on a split."
    )
    p.add_argument("--run", required=True, help="Run directory of `genni train`.")
    p.add_argument("--data", default=None, help="Dataset (default: the run's).")
    p.add_argument("--split", default=schema.TEST, choices=schema.SPLITS[1:])
    train_args.add_candidates_argument(p, "default: the run's")
    p.add_argument("--json", action="store_true", help="Print JSON.")
    p.set_defaults(handler=_evaluate)

    p = commands.add_parser(
        "tune",
        help="Hyperparameter search with keras-tuner (objective: valid NDCG@10).",
        description="Search sampler, alpha, beta, k, self-adjusted alpha, learning "
        "rate, d, layers, heads and dropout with keras-tuner; each trial is a `genni "
        "train` run. Re-running the command continues the search. Distributed: "
        "start one chief and N workers with KERASTUNER_TUNER_ID (chief, tuner0, "
        "...), KERASTUNER_ORACLE_IP and KERASTUNER_ORACLE_PORT set.",
    )
    p.add_argument("--data", required=True, help="Output of `genni preprocess`.")
    p.add_argument("--output", required=True, help="Search directory.")
    p.add_argument(
        "--oracle", default="random", choices=("random", "bayesian", "hyperband")
    )
    p.add_argument("--max-trials", type=int, default=12)
    p.add_argument("--epochs-per-trial", type=int, default=30)
    p.add_argument("--patience", type=int, default=10)
    p.add_argument(
        "--space", default=None, help="JSON/YAML file replacing space entries."
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--pack",
        action="store_true",
        help="Train the trials on packed batches (`genni train --pack`: the same "
        "model and loss, several times faster on short sequences). The best "
        "configuration leaves it out: add --pack to `genni train` yourself.",
    )
    train_args.add_candidates_argument(p, "default new")
    p.set_defaults(handler=_tune)

    p = commands.add_parser(
        "export", help="Export a run as a TF Serving SavedModel (MODEL_BASE/<version>)."
    )
    p.add_argument("--run", required=True, help="Run directory of `genni train`.")
    p.add_argument("--output", required=True, help="MODEL_BASE directory.")
    p.add_argument("--version", type=int, default=None, help="Default: next free.")
    p.add_argument("--k", type=int, default=10, help="Items per answer (default 10).")
    p.add_argument("--data", default=None, help="Dataset (default: the run's).")
    train_args.add_candidates_argument(p, "default: the rule the run was trained with")
    p.set_defaults(handler=_export)

    p = commands.add_parser(
        "serve", help="Serve MODEL_BASE over TF Serving's REST and gRPC APIs."
    )
    p.add_argument("--model-base-path", required=True)
    p.add_argument("--model-name", default="genni")
    p.add_argument("--rest-port", type=int, default=8501)
    p.add_argument("--grpc-port", type=int, default=8500)
    p.add_argument("--host", default="127.0.0.1", help="Bind address (default local).")
    p.set_defaults(handler=_serve)

    p = commands.add_parser("recommend", help="Ask a model for the next items.")
    p.add_argument(
        "--history", nargs="+", required=True, help="Item ids, oldest first."
    )
    p.add_argument("--server", default=None, help="REST base URL, http://host:8501")
    p.add_argument("--model-base-path", default=None, help="Or load MODEL_BASE here.")
    p.add_argument("--model-name", default="genni")
    p.add_argument("--k", type=int, default=None)
    p.set_defaults(handler=_recommend)

    p = commands.add_parser(
        "stats", help="Print the statistics of a preprocessed dataset."
    )
    p.add_argument("data", help="Output directory of `genni preprocess`.")
    p.add_argument("--json", action="store_true", help="Print stats.json as is.")
    p.set_defaults(handler=_stats)
    return parser


def set_process_environment() -> None:
    """What the `genni` process needs before TensorFlow starts (callers' own
    settings win).

    TensorFlow's pooling (BFC) allocator on the CPU too: with plain malloc each
    training step maps and unmaps GenNi's large score blocks afresh, and the
    page faults cost more than the math on small VMs (one Toys epoch, packed,
    beside another run on 2 CPUs: 49 s with 26 s of it in the kernel, against
    31 s with 2 s; `benchmarks/cpu_allocator.py`). Set
    TF_CPU_ALLOCATOR_USE_BFC=false to go back to malloc.
    """
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def main(argv: list[str] | None = None) -> int:
    set_process_environment()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        logging.getLogger("apache_beam").setLevel(logging.ERROR)
    try:
        if extra and args.command != "preprocess":  # Only Beam takes extra flags.
            raise ValueError(f"Unknown arguments: {' '.join(extra)}")
        return args.handler(args, extra)
    except (
        FileNotFoundError,
        FileExistsError,
        ValueError,
        RuntimeError,
    ) as e:
        if args.verbose:
            raise
        print(f"genni {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())

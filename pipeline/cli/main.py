"""The `genni` command: the parser assembled from one module per command group
(`data`, `training`, `serving`, `batch`, `loop`), and the process set-up.

    genni synth --output log.json.gz            # a synthetic review log
    genni preprocess --input 'logs/*.json.gz' --output data/
    genni train --data data/ --output runs/genni --sampler genni
    genni export --run runs/genni --output models/
    genni serve --model-base-path models/

`genni preprocess` passes every flag it does not know to Apache Beam, so any
runner works: `--runner=DataflowRunner --project=P --region=R
--temp_location=gs://B/tmp --setup_file=./setup.py`, or `--runner=FlinkRunner
--flink_master=HOST:8081 --environment_type=LOOPBACK`.
"""

from __future__ import annotations

import argparse
import os
import sys

from genni.pipeline import quiet
from genni.pipeline.cli import batch, beam_flags, data, loop, serving, training
from genni.pipeline.preprocess.summary import format_stats
from genni.pipeline.training.summary import format_metrics, format_table

__all__ = [
    "EXIT_USAGE",
    "build_parser",
    "format_metrics",
    "format_stats",
    "format_table",
    "main",
]

EXIT_USAGE = 2
# Commands that never start TensorFlow.
LIGHT_COMMANDS = ("synth", "stats")
# Commands that pass the flags they do not know to Apache Beam.
BEAM_COMMANDS = ("preprocess", "batch-recommend")
WORKER_LOG_LEVEL = "WARNING"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genni",
        description="GenNi: sequential recommendation trained with model-generated "
        "negatives, from raw review logs to a served endpoint.",
        epilog="Run `genni COMMAND --help` for the flags of a command.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="Log at INFO, with TensorFlow's and Beam's own messages.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    data.add_preprocess(commands)
    data.add_synth(commands)
    training.add_train(commands)
    training.add_pretrain(commands)
    training.add_evaluate(commands)
    training.add_tune(commands)
    serving.add_export(commands)
    serving.add_add_items(commands)
    serving.add_serve(commands)
    batch.add_ann_index(commands)
    serving.add_recommend(commands)
    batch.add_batch_recommend(commands)
    data.add_stats(commands)
    loop.add_pipeline(commands)
    loop.add_replay(commands)
    return parser


def set_process_environment() -> None:
    """What the `genni` process needs before TensorFlow starts (callers' own
    settings win).

    TensorFlow's pooling (BFC) allocator on the CPU too: with plain malloc each
    training step maps and unmaps GenNi's large score blocks afresh, and the
    page faults can cost more than the math on small VMs (measured by
    `benchmarks/cpu_allocator.py`: docs/training.md, "The CPU allocator"). Set
    TF_CPU_ALLOCATOR_USE_BFC=false to go back to malloc.
    """
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def _flags(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """The option strings of `command`'s own parser."""
    for action in parser._subparsers._group_actions:
        if command in action.choices:
            return list(action.choices[command]._option_string_actions)
    return []


def main(argv: list[str] | None = None) -> int:
    set_process_environment()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    quiet.configure(args.verbose)
    if not args.verbose and args.command not in LIGHT_COMMANDS:
        quiet.start_quietly()
    try:
        if extra and args.command not in BEAM_COMMANDS:  # Only Beam takes extras.
            raise ValueError(f"Unknown arguments: {' '.join(extra)}")
        if extra:  # And only what Beam's own options parse.
            beam_flags.check(args.command, extra, _flags(parser, args.command))
        if args.verbose or args.command in LIGHT_COMMANDS:
            return args.handler(args, extra)
        if args.command in BEAM_COMMANDS:
            extra = [f"--default_sdk_harness_log_level={WORKER_LOG_LEVEL}", *extra]
        # TensorFlow's C++ runtime logs on its own (oneDNN's int64 note at the
        # first step) and Beam's worker processes share this stderr: their
        # known noise is filtered out for the whole command, not only at start.
        with quiet.worker_stderr_filtered():
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

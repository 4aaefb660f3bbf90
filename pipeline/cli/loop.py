"""`genni pipeline` and `genni replay`: the loop's commands.

The work is `genni.pipeline.loop` (`run_pipeline`, `run_replay`), which a
scheduler calls the same way; here are the flags, what is printed and the
exit codes.
"""

from __future__ import annotations

import argparse
import os

from genni.pipeline.loop import config as loop_config
from genni.pipeline.loop import replay as loop_replay
from genni.pipeline.loop import steps

EXIT_REFUSED = 3  # The guard kept the version serving now.


def _paragraphs(doc: str) -> list[str]:
    return doc.strip().split("\n\n")


# `genni pipeline --help`: what the file holds (`loop.config`) and when a
# step is skipped (`loop.steps`).
PIPELINE_HELP = "\n\n".join(
    [
        "`genni pipeline --config pipeline.yaml`: the steps from logs to the "
        "served\nmodel, in order, each skipped when its output for the same "
        "inputs and settings\nalready exists.",
        _paragraphs(loop_config.__doc__)[1],
        *_paragraphs(steps.__doc__)[1:],
    ]
)


def _pipeline(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.loop import run_pipeline

    result = run_pipeline(args.config)
    return 0 if result.published else EXIT_REFUSED


def add_pipeline(commands) -> None:
    p = commands.add_parser(
        "pipeline",
        help="Preprocess, (tune,) train, evaluate and the guarded export, in order.",
        description=PIPELINE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", required=True, help="The pipeline file (YAML/JSON).")
    p.set_defaults(handler=_pipeline)


def every_days(every: str) -> float:
    """`--every`'s days: "7d" or "7"."""
    try:
        return float(every.removesuffix("d"))
    except ValueError:
        raise ValueError(f"--every takes days, e.g. 7d. Got {every!r}.") from None


def _replay(args: argparse.Namespace, extra: list[str]) -> int:
    config = loop_config.load_config(args.config, needs=())
    loop_replay.run_replay(
        args.input,
        every_days(args.every),
        args.steps,
        config,
        args.output,
        serve=args.serve,
        loops=("warm", "scratch") if args.loops == "both" else (args.loops,),
        item_attributes=args.item_attributes,
    )
    print(f"Report: {os.path.join(args.output, 'replay.md')}")
    return 0


def add_replay(commands) -> None:
    p = commands.add_parser(
        "replay",
        help="Replay a timestamped log: the nightly pipeline, step by step, each "
        "served version scored on the next period.",
        description=loop_replay.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", required=True, help="A timestamped log (one file).")
    p.add_argument("--every", default="7d", help="Days between steps (default 7d).")
    p.add_argument("--steps", type=int, required=True, help="How many steps.")
    p.add_argument(
        "--config",
        required=True,
        help="The pipeline file (`genni pipeline`), without input and workdir: "
        "the replay sets them (--input cut at each step, --output).",
    )
    p.add_argument("--output", required=True, help="Directory to write.")
    p.add_argument(
        "--loops",
        choices=("both", "warm", "scratch"),
        default="both",
        help="Which loops run: the warm-started one, the one from scratch, or "
        "both side by side (default both; one loop takes about half the time).",
    )
    p.add_argument(
        "--item-attributes",
        default=None,
        metavar="ITEMS_FILE",
        help="The shop's items file (any layout `genni preprocess "
        "--item-attributes` reads): the catalog at every step, and the runs "
        "know items by their attributes (item_tower, unless the config's train: "
        "sets it). Either way each loop's entry reports new_targets: the cases "
        "whose target has no trained ID row in the served version.",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="Run `genni serve` on the loop's models directory from the first "
        "published version on, with a client asking it all along (REST and gRPC, "
        "the next period's histories): the report counts its requests and "
        "failures across every swap.",
    )
    p.set_defaults(handler=_replay)

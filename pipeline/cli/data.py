"""`genni preprocess`, `genni synth` and `genni stats`: the data commands.

Their flags live here; the work is `genni.pipeline.preprocess`, imported when a
command runs (so `genni --help` starts quickly and Beam's import-time messages
come after logging is set up).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from genni.components import schema
from genni.pipeline.cli.common import add_field_flags, from_args, say_dead_letters
from genni.pipeline.preprocess import formats, sequences, synthetic
from genni.pipeline.preprocess.config import DEFAULT_MAX_KCORE_ROUNDS, PreprocessConfig
from genni.pipeline.preprocess.summary import format_stats
from genni.pipeline.preprocess.synthetic import SyntheticConfig


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """How review logs are read (`genni preprocess`, `genni batch-recommend`)."""
    parser.add_argument(
        "--format",
        default=formats.AUTO,
        choices=(formats.AUTO, *formats.FORMATS),
        help="Log format; 'auto' detects it from the first line (default).",
    )
    parser.add_argument(
        "--min-rating",
        type=float,
        default=None,
        help="Keep only reviews with rating > R (default: keep all).",
    )


def add_preprocess_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `genni preprocess` (Beam's own options pass through)."""
    parser.add_argument(
        "--input", required=True, help="Glob of review logs, plain or .gz."
    )
    parser.add_argument(
        "--output", required=True, help="Directory to write (local or any Beam FS)."
    )
    add_reading_arguments(parser)
    parser.add_argument(
        "--min-count",
        type=int,
        default=schema.DEFAULT_MIN_COUNT,
        help="k of the iterative k-core over users and items (default 5).",
    )
    parser.add_argument(
        "--max-len",
        type=int,
        default=schema.DEFAULT_MAX_LEN,
        help="Most recent items kept per sequence (default 50).",
    )
    parser.add_argument(
        "--item-attributes",
        default=None,
        help="Item attributes keyed by raw item id: an S3-Rec item2attributes.json, "
        "item metadata lines (Amazon 2014/2018/2023: brand and categories; Yelp "
        "business.json: categories), a MovieLens movies.csv, movies.dat or "
        "u.item (genres, year), a RecBole .item file, a CSV with a header or "
        "JSON lines (an id, categorical columns); docs/data.md. Every item "
        "listed joins the vocabulary; the item tower and `genni pretrain` read them.",
    )
    parser.add_argument(
        "--max-kcore-rounds",
        type=int,
        default=DEFAULT_MAX_KCORE_ROUNDS,
        help="Fail if the k-core has not converged after this many rounds.",
    )
    parser.add_argument(
        "--split",
        choices=sequences.SPLIT_RULES,
        default=sequences.LEAVE_ONE_OUT,
        help="How evaluation cases are held out: 'leave_one_out' (the default: "
        "each user's last event is the test case, the one before the validation "
        "case) or 'time' (calendar cutoffs over the whole log: every event of the "
        "last --test-days days is a test case, of the --valid-days before them a "
        "validation case, each with all of its user's earlier events as history; "
        "only what came before the validation cutoff is learned or counted, and a "
        "target item never seen before it is a miss).",
    )
    parser.add_argument(
        "--test-days",
        type=float,
        default=None,
        metavar="D",
        help="The test window of --split time, in days.",
    )
    parser.add_argument(
        "--valid-days",
        type=float,
        default=None,
        metavar="D",
        help="The validation window of --split time, in days (default: --test-days).",
    )
    parser.add_argument(
        "--min-cases",
        type=int,
        default=0,
        metavar="N",
        help="With --split time: the scoreable cases (a target the vocabulary "
        "knows) each window must hold. A window with fewer is widened, its days "
        "doubled, while both windows stay within half of the log's days; one "
        "still short is reported, and the guarded export refuses to judge on "
        "it (default 0: the windows as given).",
    )
    parser.add_argument(
        "--previous",
        default=None,
        metavar="DATA",
        help="An earlier `genni preprocess` output (of the same log before it "
        "grew) whose user and item ids are kept, new ones after them: the "
        "vocabulary only grows, so a model trained on DATA can be warm-started "
        "on this output (`genni train --warm-start`).",
    )
    add_field_flags(parser, PreprocessConfig("", ""), HOLD_OUT_FLAGS)
    parser.add_argument(
        "--overwrite", action="store_true", help="Replace a non-empty --output."
    )


# The cold-start benchmark's flags: PreprocessConfig's fields (type and
# default from the field).
HOLD_OUT_FLAGS = {
    "hold_out_items": "Hold this share of the items out of training and "
    "validation: a benchmark of items never trained on, which stay in the "
    "vocabulary as test targets only (leave-one-out; default %(default)s).",
    "hold_out_seed": "The seed of --hold-out-items' draw (default %(default)s).",
}


def preprocess_config_from_args(args: argparse.Namespace) -> PreprocessConfig:
    """`genni preprocess`'s settings: each of its flags is a field."""
    return from_args(PreprocessConfig, args)


# `genni synth`'s settings flags: SyntheticConfig's fields (type and default
# from the field), with a help line where one is needed.
SYNTH_FLAGS = {
    "num_users": None,
    "num_items": None,
    "mean_length": None,
    "transition_prob": "Chance that the next item follows the planted transition "
    "graph.",
    "zipf_exponent": "Popularity skew of the items drawn outside the graph "
    "(default %(default)s). A large catalog needs a flatter one (e.g. 0.5) and "
    "enough events for most items to pass the 5-core "
    "(benchmarks/results/scale_log.md).",
    "seed": None,
}


def add_synth_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SyntheticConfig()
    parser.add_argument(
        "--output", required=True, help="File to write (.json or .json.gz)."
    )
    add_field_flags(parser, defaults, SYNTH_FLAGS)
    parser.add_argument(
        "--shuffle-buffer",
        type=int,
        default=synthetic.DEFAULT_SHUFFLE_BUFFER,
        help="Lines shuffled together. The log is streamed to disk, so memory "
        "stays bounded by this and the catalog, not by the number of events "
        "(default: %(default)s, about 100 MB; a smaller log is shuffled whole).",
    )


def synth_config_from_args(args: argparse.Namespace) -> SyntheticConfig:
    return from_args(SyntheticConfig, args, SYNTH_FLAGS)


def _preprocess(args: argparse.Namespace, beam_args: list[str]) -> int:
    from genni.pipeline.preprocess import beam as preprocess
    from genni.pipeline.preprocess import windows

    config = preprocess_config_from_args(args)
    print(f"Preprocessing {config.input} -> {config.output} (Apache Beam)", flush=True)
    start = time.perf_counter()
    stats = windows.preprocess(
        config, lambda c: preprocess.preprocess(c, beam_args), log=print
    )
    print(f"Done in {time.perf_counter() - start:.1f} s.")
    print(format_stats(stats))
    dead_letters = os.path.join(config.output, schema.DEAD_LETTER_DIR)
    say_dead_letters(stats["malformed_lines"], dead_letters)
    return 0


def _synth(args: argparse.Namespace, extra: list[str]) -> int:
    start = time.perf_counter()

    def progress(lines: int) -> None:
        seconds = time.perf_counter() - start
        print(f"  {lines:,} lines ({seconds:.0f} s)", flush=True)

    n = synthetic.write_log(
        synth_config_from_args(args), args.output, args.shuffle_buffer, progress
    )
    print(f"Wrote {n:,} review lines to {args.output}")
    return 0


def _stats(args: argparse.Namespace, extra: list[str]) -> int:
    stats = schema.read_stats(args.data)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def add_preprocess(commands) -> None:
    p = commands.add_parser(
        "preprocess",
        help="Review logs -> TFRecords of padded sequences (Apache Beam).",
        description="Turn review logs (Amazon, Yelp, MovieLens, RecBole .inter, "
        "ratings CSV/TSV, S3-Rec sequences; plain or gzip) into leave-one-out (or "
        "by-time) TFRecords, vocabularies and statistics. Flags not listed here go "
        "to Apache Beam (e.g. --runner, --direct_num_workers). With no --runner it "
        "runs on Beam's FnApiRunner, on this machine (what the DirectRunner falls "
        "back to; never Prism, which Beam's default would first try to download).",
    )
    add_preprocess_arguments(p)
    p.set_defaults(handler=_preprocess)


def add_synth(commands) -> None:
    from genni.pipeline.preprocess import synthetic

    p = commands.add_parser(
        "synth",
        help="Write a synthetic review log with a planted sequential signal.",
        description=synthetic.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_synth_arguments(p)
    p.set_defaults(handler=_synth)


def add_stats(commands) -> None:
    p = commands.add_parser(
        "stats", help="Print the statistics of a preprocessed dataset."
    )
    p.add_argument("data", help="Output directory of `genni preprocess`.")
    p.add_argument("--json", action="store_true", help="Print stats.json as is.")
    p.set_defaults(handler=_stats)

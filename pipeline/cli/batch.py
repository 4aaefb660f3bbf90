"""`genni batch-recommend` and `genni ann-index`: recommendations in bulk and
the index that serves large catalogs."""

from __future__ import annotations

import argparse

from genni.pipeline.cli import data
from genni.pipeline.cli.common import say_dead_letters


def _batch_recommend(args: argparse.Namespace, beam_args: list[str]) -> int:
    from genni.pipeline.serving import batch

    config = batch.BatchConfig(
        model=args.model,
        input=args.input,
        output=args.output,
        k=args.k,
        format=args.format,
        min_rating=args.min_rating,
        batch_size=args.batch_size,
        num_shards=args.num_shards,
        overwrite=args.overwrite,
    )
    print(
        f"Recommending {config.k} items for every user of {config.input} -> "
        f"{config.output} (Apache Beam RunInference)",
        flush=True,
    )
    summary = batch.run(config, beam_args)
    version = summary["version"]
    print(
        f"Done in {summary['seconds']:.1f} s: {summary['users_written']:,} users "
        f"written ({summary['users_per_second']:,.0f} users/s) from "
        f"{summary['model']}" + (f" (version {version})" if version else "") + "."
    )
    if summary["users_popular_fallback"]:
        print(
            f"{summary['users_popular_fallback']:,} users had no item the model "
            "knows and got the most popular items (marked popular_fallback)."
        )
    say_dead_letters(summary["malformed_lines"], f"{args.output}/dead_letter")
    return 0


def _ann_index(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import ann

    ann.build(args.model, args.kind, args.nlist, args.nprobe, args.seed)
    return 0


def add_ann_index(commands) -> None:
    p = commands.add_parser(
        "ann-index",
        help="Build an approximate top-K index (faiss) into an export.",
        description="Build a faiss index over an export's item table into its "
        "assets.extra/ann/ (TF Serving ignores it), for `genni serve --ann`. The "
        "query is the export's user_embedding signature; the score is the model's "
        "own (inner product).",
    )
    p.add_argument(
        "--model", required=True, help="One export version: MODEL_BASE/<version>."
    )
    p.add_argument(
        "--kind",
        default="ivf",
        choices=("ivf", "hnsw"),
        help="ivf: k-means clusters, quick to build (default); hnsw: a graph, "
        "faster searches, slower to build (benchmarks/ann.py compares them).",
    )
    p.add_argument(
        "--nlist", type=int, default=None, help="IVF clusters (default about sqrt(N))."
    )
    p.add_argument(
        "--nprobe",
        type=int,
        default=None,
        help="IVF clusters searched per query (default nlist / 4, at least 8): "
        "more is slower and closer to brute force.",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=_ann_index)


def add_batch_recommend(commands) -> None:
    p = commands.add_parser(
        "batch-recommend",
        help="Top-k items for every user of a log at once (Apache Beam).",
        description="Recommend for every user of a log at once, with Apache Beam's "
        "RunInference over the exported SavedModel (the graph that serves, so each "
        "answer equals the server's for the same history). Input: the "
        "sequences.tsv of a preprocessed dataset, or review logs in any format "
        "`genni preprocess` reads, grouped into histories the same way; malformed "
        "lines go to OUTPUT/dead_letter/. Output: OUTPUT/recommendations-*.jsonl, "
        'one {"user", "items", "scores"} line per user in rank order, '
        "summary.json and _SUCCESS, moved into place when complete. Flags not "
        "listed here go to Apache Beam (e.g. --runner, "
        "--direct_running_mode=multi_processing --direct_num_workers=2). With no "
        "--runner it runs on Beam's FnApiRunner, on this machine (what the "
        "DirectRunner falls back to; never Prism, which Beam's default would "
        "first try to download).",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="MODEL_BASE[/VERSION]",
        help="Export of `genni export`: its highest version, or the one given.",
    )
    p.add_argument(
        "--input", required=True, help="sequences.tsv or a glob of review logs."
    )
    p.add_argument(
        "--output", required=True, help="Directory to write (local or any Beam FS)."
    )
    p.add_argument("--k", type=int, default=10, help="Items per user (default 10).")
    data.add_reading_arguments(p)
    p.add_argument(
        "--batch-size",
        type=int,
        default=256,
        help="Most users per model call (default 256).",
    )
    p.add_argument(
        "--num-shards",
        type=int,
        default=0,
        help="Output files (default 0: the runner decides).",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="Replace a non-empty --output."
    )
    p.set_defaults(handler=_batch_recommend)

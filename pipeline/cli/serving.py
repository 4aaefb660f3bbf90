"""`genni export`, `add-items`, `serve` and `recommend`: the serving commands."""

from __future__ import annotations

import argparse
import os
import sys

from genni.pipeline.cli import train_args

EXIT_REFUSED = 3  # `genni export --against`: the candidate was not published.


def warn_unfinished(run: str) -> None:
    from genni.pipeline.training import rundir

    if os.path.isdir(run) and not rundir.finished(run):
        print(
            f"Warning: {rundir.unfinished_message(run)}; using its best weights "
            "so far.",
            file=sys.stderr,
        )


def _export(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import export

    if args.against is not None:
        return _guarded_export(args)
    if args.max_regression is not None:
        raise ValueError("--max-regression needs --against MODEL_BASE.")
    warn_unfinished(args.run)
    path = export.export(
        args.run, args.output, args.version, args.k, args.data, args.candidates
    )
    print(f"Exported {args.run} to {path}")
    return 0


def _guarded_export(args: argparse.Namespace) -> int:
    from genni.pipeline.serving import guard

    decision = guard.guarded_export(
        args.run,
        args.output,
        against=args.against,
        max_regression=args.max_regression or 0.0,
        split=args.guard_split,
        k=args.k,
        data_dir=args.data,
        candidates=args.candidates,
        version=args.version,
    )
    served = decision["served"]
    print(
        f"{decision['split']} {decision['metric']}: candidate "
        f"{decision['candidate']:.2f}, served "
        + (
            f"{served:.2f} (version {decision['served_version']})"
            if served is not None
            else "none"
        )
    )
    if decision["decision"] == "published":
        print(f"Published {args.run} as {decision['path']} ({decision['why']}).")
        return 0
    print(f"Refused: {decision['why']}. Nothing was written to {args.output}.")
    return EXIT_REFUSED


def _serve(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import server as serving

    server = serving.Server(
        args.model_base_path,
        name=args.model_name,
        host=args.host,
        rest_port=args.rest_port,
        grpc_port=args.grpc_port,
        ann=args.ann,
    ).start()
    for version, why in sorted(server.repository.refused.items()):
        print(f"Skipped version {version}: {why}", file=sys.stderr)
    print(
        f"Serving {args.model_name} version {server.repository.served.version} "
        f"from {args.model_base_path}: REST "
        f"http://{args.host}:{server.rest_port}/v1/models/{args.model_name}, gRPC "
        f"{args.host}:{server.grpc_port}"
        + (", top-K from the ANN index" if args.ann else "")
        + ". Ctrl-C stops.",
        flush=True,
    )
    server.wait()
    return 0


def _recommend(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import client

    if bool(args.server) == bool(args.model_base_path):
        raise ValueError("Pass exactly one of --server URL or --model-base-path P.")
    if args.k is not None and args.k < 1:
        raise ValueError(f"--k must be at least 1; got {args.k}.")

    def ask(history):
        if args.server:
            return client.recommend_rest(args.server, args.model_name, history, args.k)
        return client.recommend_local(args.model_base_path, history, args.k)

    result = ask(args.history)
    for rank, (item, score) in enumerate(zip(*result, strict=True), start=1):
        print(f"{rank:3d}. {item}  {score:.4f}")
    # Unknown ids are dropped by the model: a history of none it knows gets
    # the answer of an empty one, its fallback. Say so.
    if result == ask([""]):
        print(
            "Note: no item of --history is known to the model: these are its "
            "answer to an empty history (the most popular items).",
            file=sys.stderr,
        )
    return 0


def add_export(commands) -> None:
    p = commands.add_parser(
        "export", help="Export a run as a TF Serving SavedModel (MODEL_BASE/<version>)."
    )
    p.add_argument("--run", required=True, help="Run directory of `genni train`.")
    p.add_argument("--output", required=True, help="MODEL_BASE directory.")
    p.add_argument("--version", type=int, default=None, help="Default: next free.")
    p.add_argument("--k", type=int, default=10, help="Items per answer (default 10).")
    p.add_argument("--data", default=None, help="Dataset (default: the run's).")
    train_args.add_candidates_argument(p, "default: the rule the run was trained with")
    guard = p.add_argument_group(
        "guarded export",
        "Publish only a model at least as good as the one serving now: the run "
        "and the highest version of --against are evaluated the same way (full "
        "ranking, NDCG@10, through their top_k signatures) on one split of "
        "--data; the run becomes the next version only if it is not worse by "
        "more than --max-regression points. With no version serving yet it is "
        "published. The decision is printed and appended to "
        "MODEL_BASE/decisions.jsonl; a refusal exits with status 3.",
    )
    guard.add_argument(
        "--against",
        default=None,
        metavar="MODEL_BASE",
        help="The model base whose latest version serves now (usually --output).",
    )
    guard.add_argument(
        "--max-regression",
        type=float,
        default=None,
        metavar="POINTS",
        help="Allowed drop in NDCG@10, in percentage points (default 0).",
    )
    guard.add_argument(
        "--guard-split",
        default="valid",
        choices=("valid", "test"),
        help="Split both models are evaluated on (default valid).",
    )
    p.set_defaults(handler=_export)


def _add_items(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.serving import catalog_version

    catalog_version.add_items(
        args.model_base_path,
        args.items,
        run_dir=args.run,
        version=args.version,
        allow_changes=args.allow_changes,
    )
    return 0


def add_add_items(commands) -> None:
    p = commands.add_parser(
        "add-items",
        help="Serve new items from an items file, nothing retrained: the next "
        "version of MODEL_BASE scores them by their attributes (--item-tower runs).",
        description="Write the next version of MODEL_BASE from the run its served "
        "version was exported from and ITEMS: the items ITEMS lists that it does "
        "not serve yet are added, each scored by the mean of its attributes' "
        "trained rows (attributes no trained item holds are left out). The "
        "trained part is not judged again; the new version must rank the served "
        "items as the served one does, and its decision is appended to "
        "MODEL_BASE/decisions.jsonl. `genni serve` swaps to it as to any version.",
    )
    p.add_argument("--model-base-path", required=True, help="MODEL_BASE directory.")
    p.add_argument(
        "--items",
        required=True,
        help="The catalog: an items file as `genni preprocess --item-attributes` "
        "reads (S3-Rec JSON, item metadata, MovieLens movies.csv/.dat or u.item, "
        "RecBole .item, CSV, JSON "
        "lines). It must list every item the served version lists, unchanged.",
    )
    p.add_argument(
        "--run",
        default=None,
        help="The run the served version was exported from (default: the one "
        "its guarded export or earlier add-items recorded).",
    )
    p.add_argument("--version", type=int, default=None, help="Default: next free.")
    p.add_argument(
        "--allow-changes",
        action="store_true",
        help="Accept an items file that changes listed items' attributes (they "
        "are served with the new ones) or drops listed items (they stay served).",
    )
    p.set_defaults(handler=_add_items)


def add_serve(commands) -> None:
    p = commands.add_parser(
        "serve", help="Serve MODEL_BASE over TF Serving's REST and gRPC APIs."
    )
    p.add_argument("--model-base-path", required=True)
    p.add_argument("--model-name", default="genni")
    p.add_argument("--rest-port", type=int, default=8501)
    p.add_argument("--grpc-port", type=int, default=8500)
    p.add_argument("--host", default="127.0.0.1", help="Bind address (default local).")
    p.add_argument(
        "--ann",
        action="store_true",
        help="Answer serving_default and top_k from each version's approximate "
        "nearest-neighbour index (`genni ann-index`) instead of brute force: for "
        "catalogs so large that brute force is too slow. Needs faiss.",
    )
    p.set_defaults(handler=_serve)


def add_recommend(commands) -> None:
    p = commands.add_parser("recommend", help="Ask a model for the next items.")
    p.add_argument(
        "--history", nargs="+", required=True, help="Item ids, oldest first."
    )
    p.add_argument("--server", default=None, help="REST base URL, http://host:8501")
    p.add_argument("--model-base-path", default=None, help="Or load MODEL_BASE here.")
    p.add_argument("--model-name", default="genni")
    p.add_argument("--k", type=int, default=None)
    p.set_defaults(handler=_recommend)

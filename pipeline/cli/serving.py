"""`genni export`, `serve` and `recommend`: the serving commands."""

from __future__ import annotations

import argparse
import sys

from genni.pipeline.cli import train_args


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
    p.set_defaults(handler=_export)


def add_serve(commands) -> None:
    p = commands.add_parser(
        "serve", help="Serve MODEL_BASE over TF Serving's REST and gRPC APIs."
    )
    p.add_argument("--model-base-path", required=True)
    p.add_argument("--model-name", default="genni")
    p.add_argument("--rest-port", type=int, default=8501)
    p.add_argument("--grpc-port", type=int, default=8500)
    p.add_argument("--host", default="127.0.0.1", help="Bind address (default local).")
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

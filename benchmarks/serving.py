"""Serving: agreement of every path, then latency and throughput.

1. Agreement: for sample users of the run's test split, the top-10 of the
   in-process model, the loaded SavedModel, REST and the official gRPC stub.
2. Latency p50 / p99 and throughput of REST and gRPC at concurrency 1 and 8,
   beside the raw SavedModel call in the same run. Targets (issue 4, on this
   CPU): gRPC p99 < 10 ms at concurrency 1, REST p99 < 15 ms, the endpoint adds
   < 2 ms over the raw call at p50.

    python benchmarks/serving.py --run RUN_DIR [--requests 400]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np
from _common import machine, write_results

from pipeline import client, export, schema, serving, train

SAMPLE_USERS = 20


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def summarize(latencies: list[float], seconds: float) -> dict:
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "throughput_rps": len(latencies) / seconds,
        "requests": len(latencies),
    }


def load(fn, histories: list[list[str]], requests: int, concurrency: int) -> dict:
    """Run `fn(history)` `requests` times from `concurrency` threads."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_thread = requests // concurrency

    def worker(offset: int, call) -> None:
        mine = []
        for i in range(per_thread):
            history = histories[(offset + i) % len(histories)]
            start = time.perf_counter()
            call(history)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    calls = [fn() for _ in range(concurrency)]  # One connection per thread.
    threads = [
        threading.Thread(target=worker, args=(t * 7, calls[t]))
        for t in range(concurrency)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarize(latencies, time.perf_counter() - start)


def rest_caller(port: int):
    def make():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def call(history):
            conn.request(
                "POST",
                "/v1/models/genni:predict",
                body=json.dumps({"instances": [history]}),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(body)

        return call

    return make


def grpc_caller(port: int):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def make():
        def call(history):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "genni"
            request.inputs["history"].CopyFrom(
                tf.make_tensor_proto([history], dtype=tf.string)
            )
            stub.Predict(request, timeout=30)

        return call

    return make


def raw_caller(model):
    import tensorflow as tf

    fn = model.signatures["serving_default"]

    def make():
        return lambda history: fn(history=tf.constant([history])).items()

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="Run directory of genni train.")
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args(argv)
    import tensorflow as tf

    config = train.read_config(args.run)
    info = schema.DatasetInfo.load(config.data)
    with open(os.path.join(config.data, schema.ITEMS_FILE)) as f:
        items = f.read().splitlines()
    with open(os.path.join(config.data, schema.SEQUENCES_FILE)) as f:
        sequences = [line.rstrip("\n").split("\t")[1].split() for line in f]
    rng = np.random.default_rng(0)
    histories = [
        sequences[i][:-1] for i in rng.choice(len(sequences), 200, replace=False)
    ]

    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "models")
        path = export.export(args.run, base, k=10)
        model = tf.saved_model.load(path)
        in_process = train.load_run(args.run)
        server = serving.Server(base, rest_port=0, grpc_port=0).start()
        try:
            agree, max_diff = 0, 0.0
            for history in histories[:SAMPLE_USERS]:
                want, want_scores = export.reference_top_k(
                    in_process, items, history, info.max_len, 10
                )
                out = model.signatures["serving_default"](
                    history=tf.constant([history])
                )
                saved = [b.decode() for b in out["item_ids"].numpy()[0]]
                rest_ids, rest_scores = client.recommend_rest(
                    f"http://127.0.0.1:{server.rest_port}", "genni", history
                )
                grpc_ids, grpc_scores = client.recommend_grpc(
                    f"127.0.0.1:{server.grpc_port}", "genni", history
                )
                agree += want == saved == rest_ids == grpc_ids
                for scores in (out["scores"].numpy()[0], rest_scores, grpc_scores):
                    max_diff = max(
                        max_diff, float(np.max(np.abs(want_scores - scores)))
                    )
            print(
                f"Agreement: {agree}/{SAMPLE_USERS} users identical top-10 on all four "
                f"paths; max score difference {max_diff:.2e}"
            )

            results: dict = {}
            for name, make in (
                ("raw", raw_caller(model)),
                ("grpc", grpc_caller(server.grpc_port)),
                ("rest", rest_caller(server.rest_port)),
            ):
                load(make, histories, 40, 1)  # Warm up.
                for concurrency in (1, 8):
                    r = load(make, histories, args.requests, concurrency)
                    results[f"{name}_c{concurrency}"] = r
                    print(
                        f"  {name:4s} c={concurrency}: p50 {r['p50_ms']:.2f} ms, p99 "
                        f"{r['p99_ms']:.2f} ms, {r['throughput_rps']:.0f} req/s"
                    )
        finally:
            server.stop()

    overhead = {
        p: results[f"{p}_c1"]["p50_ms"] - results["raw_c1"]["p50_ms"]
        for p in ("grpc", "rest")
    }
    summary = {
        "run": args.run,
        "items": info.num_items,
        "agreement_users": agree,
        "sample_users": SAMPLE_USERS,
        "max_score_difference": max_diff,
        "latency": results,
        "p50_overhead_ms": overhead,
        "targets": {"grpc_p99_c1_ms": 10, "rest_p99_c1_ms": 15, "p50_overhead_ms": 2},
        "machine": machine(),
    }
    rows = "\n".join(
        f"| {k.split('_c')[0]} | {k.split('_c')[1]} | {v['p50_ms']:.2f} | "
        f"{v['p99_ms']:.2f} | {v['throughput_rps']:.0f} |"
        for k, v in results.items()
    )
    markdown = (
        "# Serving\n\n"
        f"Model from `{args.run}` ({info.num_items:,} items), one history per request, "
        f"{args.requests} requests per row, {machine()['cpus']} CPUs.\n\n"
        f"Agreement: {agree}/{SAMPLE_USERS} users get identical top-10 ids from the "
        "in-process model, the SavedModel, REST and gRPC; max score difference "
        f"{max_diff:.1e}.\n\n"
        "| path | concurrency | p50 ms | p99 ms | req/s |\n|---|---|---|---|---|\n"
        f"{rows}\n\n"
        f"Endpoint overhead over the raw call at p50, concurrency 1: gRPC "
        f"{overhead['grpc']:.2f} ms, REST {overhead['rest']:.2f} ms (target < 2 ms). "
        "Targets: gRPC p99 < 10 ms and REST p99 < 15 ms at concurrency 1.\n\n"
        f"Command: `python benchmarks/serving.py --run {args.run}`\n"
    )
    print(markdown)
    write_results("serving", summary, markdown)
    return 0 if agree == SAMPLE_USERS else 1


if __name__ == "__main__":
    sys.exit(main())

"""Serving: agreement of every path, then latency and throughput.

1. Agreement: for sample users of the run's test split, the top-10 of the
   in-process model, the loaded SavedModel, REST and the official gRPC stub.
2. Latency p50 / p99, throughput and failures of REST and gRPC at concurrency
   1, 8 and 32, beside the raw SavedModel call in the same run. Targets (issue
   4, on this CPU): gRPC p99 < 10 ms at concurrency 1, REST p99 < 15 ms, the
   endpoint adds < 2 ms over the raw call at p50; no failure at any
   concurrency (issue 28).
3. Hot swaps under load (issue 28), REST and gRPC at concurrency 1, 8 and 32:
   (a) a foreign SavedModel (not a GenNi export) dropped in as a new version
   must be refused while the old version serves on; (b) a corrupt version
   (truncated variables) then a good one: the corrupt one is refused and the
   good one becomes served. Target: 0 failed requests.

    python benchmarks/serving.py --run RUN_DIR [--requests 400]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np
from _common import machine, write_results

from genni.components import schema
from genni.pipeline.serving import client, export
from genni.pipeline.serving import server as serving
from genni.pipeline.serving.probe import wait_until
from genni.pipeline.training import train

SAMPLE_USERS = 20
CONCURRENCY = (1, 8, 32)
SWAP_TIMEOUT_S = 120.0


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def summarize(latencies: list[float], seconds: float, failures: int = 0) -> dict:
    return {
        "p50_ms": percentile(latencies, 50) if latencies else float("nan"),
        "p99_ms": percentile(latencies, 99) if latencies else float("nan"),
        "throughput_rps": len(latencies) / seconds,
        "requests": len(latencies) + failures,
        "failures": failures,
    }


class Load:
    """`concurrency` threads, each with its own caller from `make()`, calling
    it on `histories` in turn until `stop()`, or `requests` in all."""

    def __init__(self, make, histories, concurrency: int, requests: int | None = None):
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.started = 0  # Requests begun so far, counted live.
        self._lock = threading.Lock()
        self._stop = threading.Event()
        per_thread = None if requests is None else max(1, requests // concurrency)
        calls = [make() for _ in range(concurrency)]  # One connection per thread.
        self._threads = [
            threading.Thread(target=self._worker, args=(t * 7, calls[t], per_thread))
            for t in range(concurrency)
        ]
        self._histories = histories
        self._start = time.perf_counter()
        for t in self._threads:
            t.start()

    def _worker(self, offset: int, call, per_thread: int | None) -> None:
        mine, errors, i = [], [], 0
        while not self._stop.is_set() and (per_thread is None or i < per_thread):
            history = self._histories[(offset + i) % len(self._histories)]
            i += 1
            with self._lock:
                self.started += 1
            start = time.perf_counter()
            try:
                call(history)
            except Exception as e:  # Count it, go on.
                errors.append(f"{type(e).__name__}: {str(e)[:200]}")
            else:
                mine.append(time.perf_counter() - start)
        with self._lock:
            self.latencies.extend(mine)
            self.errors.extend(errors)

    def stop(self) -> dict:
        self._stop.set()
        return self.join()

    def join(self) -> dict:
        for t in self._threads:
            t.join()
        result = summarize(
            self.latencies, time.perf_counter() - self._start, len(self.errors)
        )
        result["first_errors"] = sorted(set(self.errors))[:3]
        return result


def load(fn, histories: list[list[str]], requests: int, concurrency: int) -> dict:
    """Run `fn()(history)` `requests` times from `concurrency` threads."""
    return Load(fn, histories, concurrency, requests).join()


def rest_caller(port: int):
    def make():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def call(history):
            try:
                conn.request(
                    "POST",
                    "/v1/models/genni:predict",
                    body=json.dumps({"instances": [history]}),
                    headers={"Content-Type": "application/json"},
                )
                response = conn.getresponse()
                body = response.read()
            except OSError:
                conn.close()  # Reconnects on the next request.
                raise
            if response.status != 200:
                raise RuntimeError(f"{response.status} {body[:200]!r}")

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


def foreign_savedmodel(path: str) -> None:
    """A valid SavedModel that is not a GenNi export (one `double` signature)."""
    import tensorflow as tf

    module = tf.Module()
    module.double = tf.function(
        lambda x: {"y": 2.0 * x}, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    tf.saved_model.save(module, path, signatures={"serving_default": module.double})


def corrupt_copy(source: str):
    """A copy of the export at `source` with its variables truncated."""

    def fill(path: str) -> None:
        shutil.copytree(source, path)
        variables = os.path.join(path, "variables")
        for name in os.listdir(variables):
            if name.startswith("variables.data-"):
                with open(os.path.join(variables, name), "r+b") as f:
                    f.truncate(16)

    return fill


def add_version(base: str, version: int, fill) -> None:
    """Write a version under a staging name, then rename it into place."""
    staging = os.path.join(base, f".staging-{version}")
    fill(staging)
    os.rename(staging, os.path.join(base, str(version)))


def swap_check(
    server, base: str, good: str, scenario: str, make, histories, concurrency, requests
) -> dict:
    """Load from `concurrency` clients across a hot swap; at least `requests`.

    "foreign": a foreign SavedModel as the next version; it must be refused
    and the served version stay. "corrupt_then_good": a corrupt version, then
    (once it is refused) a copy of `good`, which must become served.
    """
    repository = server.repository
    before = repository.served.version
    running = Load(make, histories, concurrency)
    time.sleep(0.2)
    started = time.perf_counter()
    bad = max(repository.available()) + 1
    if scenario == "foreign":
        add_version(base, bad, foreign_savedmodel)
        expected = before
        ok = wait_until(lambda: bad in repository.refused, SWAP_TIMEOUT_S)
    else:
        add_version(base, bad, corrupt_copy(good))
        ok = wait_until(lambda: bad in repository.refused, SWAP_TIMEOUT_S)
        expected = bad + 1
        add_version(base, expected, lambda path: shutil.copytree(good, path))
        swapped = wait_until(
            lambda: repository.served.version == expected, SWAP_TIMEOUT_S
        )
        ok = swapped and ok
    swap_s = time.perf_counter() - started
    wait_until(lambda: running.started >= requests, 60)
    result = running.stop()
    after = repository.served.version
    result.update(
        served_before=before,
        served_after=after,
        expected=expected,
        outcome_ok=ok and after == expected,
        swap_s=swap_s,
    )
    return result


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
        server = serving.Server(
            base, rest_port=0, grpc_port=0, poll_seconds=0.2
        ).start()
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
                for concurrency in CONCURRENCY:
                    r = load(make, histories, args.requests, concurrency)
                    results[f"{name}_c{concurrency}"] = r
                    print(
                        f"  {name:4s} c={concurrency}: p50 {r['p50_ms']:.2f} ms, p99 "
                        f"{r['p99_ms']:.2f} ms, {r['throughput_rps']:.0f} req/s, "
                        f"{r['failures']} failed {r['first_errors']}"
                    )

            swaps: dict = {}
            for scenario in ("foreign", "corrupt_then_good"):
                for name, make in (
                    ("grpc", grpc_caller(server.grpc_port)),
                    ("rest", rest_caller(server.rest_port)),
                ):
                    for concurrency in CONCURRENCY:
                        r = swap_check(
                            server,
                            base,
                            path,
                            scenario,
                            make,
                            histories,
                            concurrency,
                            args.requests,
                        )
                        swaps[f"{scenario}_{name}_c{concurrency}"] = r
                        print(
                            f"  {scenario} {name:4s} c={concurrency}: {r['requests']} "
                            f"requests, {r['failures']} failed, p50 {r['p50_ms']:.2f} "
                            f"ms, p99 {r['p99_ms']:.2f} ms, served "
                            f"{r['served_before']} -> {r['served_after']} (expected "
                            f"{r['expected']}) in {r['swap_s']:.1f} s "
                            f"{r['first_errors']}"
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
        "hot_swaps": swaps,
        "p50_overhead_ms": overhead,
        "targets": {
            "grpc_p99_c1_ms": 10,
            "rest_p99_c1_ms": 15,
            "p50_overhead_ms": 2,
            "failures": 0,
        },
        "machine": machine(),
    }
    rows = "\n".join(
        f"| {k.split('_c')[0]} | {k.split('_c')[1]} | {v['p50_ms']:.2f} | "
        f"{v['p99_ms']:.2f} | {v['throughput_rps']:.0f} | {v['failures']} |"
        for k, v in results.items()
    )
    swap_rows = "\n".join(
        f"| {k.rsplit('_', 2)[0]} | {k.rsplit('_', 2)[1]} | {k.rsplit('_c', 1)[1]} | "
        f"{v['requests']} | {v['failures']} | {v['p50_ms']:.2f} | {v['p99_ms']:.2f} "
        f"| {v['served_before']} -> {v['served_after']} ({v['expected']}) | "
        f"{v['swap_s']:.1f} |"
        for k, v in swaps.items()
    )
    failures = sum(v["failures"] for v in [*results.values(), *swaps.values()])
    swaps_ok = all(v["outcome_ok"] for v in swaps.values())
    markdown = (
        "# Serving\n\n"
        f"Model from `{args.run}` ({info.num_items:,} items), one history per request, "
        f"{args.requests} requests per row, {machine()['cpus']} CPUs.\n\n"
        f"Agreement: {agree}/{SAMPLE_USERS} users get identical top-10 ids from the "
        "in-process model, the SavedModel, REST and gRPC; max score difference "
        f"{max_diff:.1e}.\n\n"
        "| path | concurrency | p50 ms | p99 ms | req/s | failed |\n"
        "|---|---|---|---|---|---|\n"
        f"{rows}\n\n"
        "Hot swaps under load (at least "
        f"{args.requests} requests per row): a foreign SavedModel as the next "
        "version (must be refused, the old version serving on), and a corrupt "
        "version then a good one (the good one must become served).\n\n"
        "| scenario | path | concurrency | requests | failed | p50 ms | p99 ms | "
        "served before -> after (expected) | swap s |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        f"{swap_rows}\n\n"
        f"Failed requests in all: {failures} (target 0); hot swaps as expected: "
        f"{'all' if swaps_ok else 'NOT all'}.\n\n"
        f"Endpoint overhead over the raw call at p50, concurrency 1: gRPC "
        f"{overhead['grpc']:.2f} ms, REST {overhead['rest']:.2f} ms (target < 2 ms). "
        "Targets: gRPC p99 < 10 ms and REST p99 < 15 ms at concurrency 1.\n\n"
        f"Command: `python benchmarks/serving.py --run {args.run}`\n"
    )
    print(markdown)
    write_results("serving", summary, markdown)
    return 0 if agree == SAMPLE_USERS and failures == 0 and swaps_ok else 1


if __name__ == "__main__":
    sys.exit(main())

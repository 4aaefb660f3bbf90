"""Batch recommendations: users per second of `genni batch-recommend` (Beam
RunInference, DirectRunner in-process and multi_processing) beside a plain loop
over the SavedModel and beside the REST endpoint, and their agreement.

All paths answer every user of the dataset's `sequences.tsv` with the top-k of
the same exported SavedModel, end to end: the plain loop reads the file, calls
the `top_k` signature in batches and writes JSON lines, as the pipeline does.
The REST rows ask a `genni serve` process (one user per request, and batches
of --batch-size per request) for a sample of users. Target (issue 30): the Beam
pipeline within 2x of the plain loop's users/s. Agreement: for 200 sample
users, the batch top-k equals the server's (same ids, scores within 1e-5).

    python benchmarks/batch_recommend.py                # Beauty, a 10-epoch model
    python benchmarks/batch_recommend.py --data DATA --model MODEL_BASE
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np
from _common import beauty_data, free_port, publish

from genni.components import schema
from genni.pipeline import quiet
from genni.pipeline.serving import batch, export
from genni.pipeline.serving.probe import serve_command

AGREEMENT_USERS = 200
TOLERANCE = 1e-5
TARGET_RATIO = 2.0


def read_sequences(data: str) -> list[tuple[str, list[str]]]:
    with open(os.path.join(data, schema.SEQUENCES_FILE)) as f:
        rows = (line.rstrip("\n").partition("\t") for line in f)
        return [(user, items.split()) for user, _, items in rows]


def train_model(data: str, root: str, epochs: int) -> str:
    from genni.pipeline.training import train
    from genni.pipeline.training.config import TrainConfig

    run = os.path.join(root, "run")
    print(f"Training a {epochs}-epoch GenNi model on {data} ...", flush=True)
    train.train(
        TrainConfig.of(data=data, output=run, epochs=epochs, pack=True), verbose=0
    )
    base = os.path.join(root, "models")
    export.export(run, base, k=export.DEFAULT_K)
    return base


def plain_loop(path: str, sequences: str, out: str, k: int, batch_size: int) -> float:
    """Read, call `top_k` in batches, write JSON lines; returns seconds."""
    import tensorflow as tf

    start = time.perf_counter()
    model = tf.saved_model.load(path)
    top_k = model.signatures[export.SIGNATURE_TOP_K]
    with open(sequences) as f:
        rows = [line.rstrip("\n").partition("\t") for line in f]
    users = [(u, items.split()) for u, _, items in rows]
    with open(out, "w") as f:
        for i in range(0, len(users), batch_size):
            chunk = users[i : i + batch_size]
            width = max(len(h) for _, h in chunk)
            padded = np.array(
                [h + [""] * (width - len(h)) for _, h in chunk], dtype=object
            )
            result = top_k(history=tf.constant(padded), k=tf.constant(k))
            ids = result[export.ITEM_IDS].numpy()
            scores = result[export.SCORES].numpy()
            counts = result[export.NUM_RESULTS].numpy()
            for row, (user, _) in enumerate(chunk):
                n = int(counts[row])
                record = {
                    "user": user,
                    "items": [x.decode() for x in ids[row, :n].tolist()],
                    "scores": scores[row, :n].tolist(),
                }
                f.write(json.dumps(record) + "\n")
    return time.perf_counter() - start


def beam_run(config: batch.BatchConfig, args: list[str]) -> float:
    start = time.perf_counter()
    with quiet.worker_stderr_filtered():
        batch.run(config, [*args, "--default_sdk_harness_log_level=WARNING"])
    return time.perf_counter() - start


def rest_predict(port: int, histories: list[list[str]], k: int) -> list[dict]:
    body = {
        "signature_name": export.SIGNATURE_TOP_K,
        "instances": [{"history": h, "k": k} for h in histories],
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models/genni:predict",
        data=json.dumps(body).encode(),
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["predictions"]


def start_server(base: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    command = serve_command(base, port, free_port())
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if not line.startswith("Serving"):
        server.kill()
        raise RuntimeError(f"genni serve did not start: {line!r}")
    return server, port


def rest_rate(port: int, histories: list, k: int, per_request: int, threads: int):
    """Users per second asking for `histories`, `per_request` per request."""
    chunks = [
        histories[i : i + per_request] for i in range(0, len(histories), per_request)
    ]
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not chunks:
                    return
                chunk = chunks.pop()
            rest_predict(port, chunk, k)

    start = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return len(histories) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None, help="Preprocessed dataset dir.")
    parser.add_argument("--model", default=None, help="MODEL_BASE of genni export.")
    parser.add_argument("--epochs", type=int, default=10, help="Without --model.")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--rest-users", type=int, default=2000, help="Users asked over REST."
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or beauty_data(tmp)
        base = args.model or train_model(data, tmp, args.epochs)
        path, version = batch.resolve_model(base)
        sequences = os.path.join(data, schema.SEQUENCES_FILE)
        users = read_sequences(data)
        n = len(users)
        print(f"{n:,} users, model {path}", flush=True)

        def config(name: str) -> batch.BatchConfig:
            return batch.BatchConfig(
                model=path,
                input=sequences,
                output=os.path.join(tmp, name),
                k=args.k,
                batch_size=args.batch_size,
            )

        seconds = {}
        seconds["plain loop over the SavedModel"] = plain_loop(
            path, sequences, os.path.join(tmp, "loop.jsonl"), args.k, args.batch_size
        )
        seconds["Beam RunInference, DirectRunner in-process"] = beam_run(
            config("inprocess"), ["--direct_running_mode=in_memory"]
        )
        seconds[f"Beam RunInference, DirectRunner multi_processing x{args.workers}"] = (
            beam_run(
                config("multi"),
                [
                    "--direct_running_mode=multi_processing",
                    f"--direct_num_workers={args.workers}",
                ],
            )
        )
        rates = {name: n / s for name, s in seconds.items()}
        found = batch.read_recommendations(config("inprocess").output)
        multi = batch.read_recommendations(config("multi").output)

        server, port = start_server(base)
        try:
            histories = [h for _, h in users[: args.rest_users]]
            rest_predict(port, histories[:8], args.k)  # Warm up.
            rates[f"REST, one user per request, {args.workers} threads"] = rest_rate(
                port, histories, args.k, 1, args.workers
            )
            rates[f"REST, {args.batch_size} users per request"] = rest_rate(
                port, histories, args.k, args.batch_size, 1
            )
            rng = np.random.default_rng(0)
            sample = [
                users[i] for i in rng.choice(n, min(AGREEMENT_USERS, n), replace=False)
            ]
            answers = rest_predict(port, [h for _, h in sample], args.k)
        finally:
            server.terminate()
            server.wait(timeout=30)

    same_ids, max_diff = 0, 0.0
    for (user, _), answer in zip(sample, answers, strict=True):
        mine = found[user]
        same_ids += mine["items"] == answer["item_ids"]
        if mine["items"] == answer["item_ids"]:
            diff = np.max(np.abs(np.subtract(mine["scores"], answer["scores"])))
            max_diff = max(max_diff, float(diff))
    multi_same = sum(multi[u]["items"] == found[u]["items"] for u in found)
    loop_rate = rates["plain loop over the SavedModel"]
    in_process = rates["Beam RunInference, DirectRunner in-process"]
    best_beam = max(r for name, r in rates.items() if name.startswith("Beam"))
    ratio = loop_rate / best_beam
    agreement = same_ids == len(sample) and max_diff <= TOLERANCE
    results = {
        "users": n,
        "model": path,
        "version": version,
        "k": args.k,
        "batch_size": args.batch_size,
        "seconds": seconds,
        "users_per_second": rates,
        "loop_over_best_beam": ratio,
        "loop_over_beam_in_process": loop_rate / in_process,
        "within_2x": ratio <= TARGET_RATIO,
        "agreement": {
            "users": len(sample),
            "same_ids": same_ids,
            "max_score_difference": max_diff,
            "passed": agreement,
        },
        "multi_processing_same_ids": f"{multi_same} of {len(found)}",
    }
    lines = [
        "# Batch recommendations",
        "",
        f"Top-{args.k} for all {n:,} users of {sequences.split(os.sep)[-2]}'s "
        f"sequences.tsv (REST rows: the first {min(args.rest_users, n):,} users), "
        f"batches of {args.batch_size}, on {os.cpu_count()} CPUs. End to end: "
        "start-up, reading, grouping, inference and writing.",
        "",
        "| path | users/s | seconds |",
        "|---|---:|---:|",
        *(
            f"| {name} | {rate:,.0f} | "
            + (f"{seconds[name]:.1f}" if name in seconds else "")
            + " |"
            for name, rate in rates.items()
        ),
        "",
        f"- Plain loop / best Beam: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: "
        f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}); plain loop / Beam "
        f"in-process: {loop_rate / in_process:.2f}x.",
        f"- Agreement with the server, {len(sample)} sampled users: {same_ids} with "
        f"the same top-{args.k} ids, largest score difference {max_diff:.1e} "
        f"({'passed' if agreement else 'FAILED'}).",
        f"- multi_processing against in-process: same ids for {multi_same} of "
        f"{len(found)} users.",
    ]
    publish("batch_recommend", lines, results)
    return 0 if agreement else 1


if __name__ == "__main__":
    sys.exit(main())

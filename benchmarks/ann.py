"""Recall and latency of the ANN index against brute force, at several settings.

For an export (MODEL_BASE/<version>) and the users of a dataset, computes each
user's exact top 10 (brute force over the item table, the history left out
under "new", as the export ranks) and then, for each IVF `nprobe` and each HNSW
`efSearch`, the index's recall@10 and its search latency per query (one
thread, one query at a time, as `genni serve --ann` searches).

    python benchmarks/ann.py --model MODEL_BASE/1 --data DATA_DIR [--users 2000]
        [--nprobe 16 52 128 256] [--ef-search 64 128 256] [--hnsw]
        [--name ann]

The index the export already has (`genni ann-index`) is left as it is; the
indexes measured here are built in memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from _common import machine, write_results

from genni.pipeline.cli import quiet
from genni.pipeline.reproduce.commands import relative, shell_line


def exact_top10(queries, table, excluded) -> np.ndarray:
    """[U, 10] item ids of the brute-force top 10 (padding and `excluded` out)."""
    out = np.zeros((len(queries), 10), dtype=np.int64)
    for start in range(0, len(queries), 256):
        scores = queries[start : start + 256] @ table.T
        scores[:, 0] = -np.inf
        for row, seen in enumerate(excluded[start : start + 256]):
            scores[row, list(seen)] = -np.inf
        top = np.argpartition(-scores, 10, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(scores, top, 1), axis=1)
        out[start : start + 256] = np.take_along_axis(top, order, 1)
    return out


def measure(index, queries, excluded, exact) -> dict:
    """Recall@10 and per-query latency of `index` (ids 1..N), one at a time."""
    times, found = [], []
    for q, seen in zip(queries, excluded, strict=True):
        start = time.perf_counter()
        _, ids = index.search(q[None, :], 10 + len(seen))
        times.append(time.perf_counter() - start)
        found.append([i for i in ids[0] if i > 0 and i not in seen][:10])
    from genni.pipeline.serving.ann import recall_at_k

    ms = 1000 * np.array(times)
    return {
        "recall_at_10": recall_at_k(found, exact, 10),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("--model", required=True, help="MODEL_BASE/<version>.")
    parser.add_argument("--data", required=True, help="The dataset it was trained on.")
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 52, 128, 256])
    parser.add_argument("--hnsw", action="store_true", help="Also an HNSW index.")
    parser.add_argument("--ef-search", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--name", default="ann")
    args = parser.parse_args(argv)

    quiet.configure(verbose=False)
    quiet.start_quietly()
    import faiss
    import tensorflow as tf

    from genni.pipeline.serving import ann, export

    sys.path.insert(0, os.path.dirname(__file__))
    from scale import histories_of

    model = tf.saved_model.load(args.model)
    settings = export.read_settings(args.model)
    table = ann.item_table(model)
    ids = {s: i for i, s in enumerate(model.item_strings.numpy().tolist()) if i}
    histories = histories_of(args.data, args.users)
    embed = model.signatures[export.SIGNATURE_EMBEDDING]
    queries = []
    for start in range(0, len(histories), 256):
        rows = histories[start : start + 256]
        width = max(map(len, rows))
        batch = np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)
        out = embed(history=tf.constant(batch, dtype=tf.string))
        queries.append(out[export.EMBEDDING].numpy())
    queries = np.ascontiguousarray(np.concatenate(queries), dtype=np.float32)
    excluded = [
        {ids[h.encode()] for h in row if h.encode() in ids}
        if settings["candidates"] == "new"
        else set()
        for row in histories
    ]
    start = time.perf_counter()
    exact = exact_top10(queries, table, excluded)
    brute_ms = 1000 * (time.perf_counter() - start) / len(queries)
    vectors = table[1:]
    num_items = len(vectors)
    rows = []
    kinds = [("ivf", args.nprobe)] + ([("hnsw", args.ef_search)] if args.hnsw else [])
    for kind, settings_list in kinds:
        faiss.omp_set_num_threads(os.cpu_count() or 1)  # Build on every core.
        start = time.perf_counter()
        index, params = ann.new_index(vectors, kind)
        build = time.perf_counter() - start
        faiss.omp_set_num_threads(1)  # Search as the server does.
        inner = faiss.downcast_index(index.index)
        for value in settings_list:
            if kind == "ivf":
                inner.nprobe = min(value, params["nlist"])
                name, setting = f"ivf nlist {params['nlist']}", f"nprobe {inner.nprobe}"
            else:
                inner.hnsw.efSearch = value
                name, setting = f"hnsw m {params['m']}", f"efSearch {value}"
            rows.append(
                {"index": name, "setting": setting}
                | measure(index, queries, excluded, exact)
                | {"build_s": build}
            )
            print(rows[-1], flush=True)
    results = {
        "model": args.model,
        "items": int(num_items),
        "users": len(queries),
        "candidates": settings["candidates"],
        "brute_force_numpy_ms_per_user": brute_ms,
        "rows": rows,
        "machine": machine(),
        "command": shell_line(
            ["python", "benchmarks/ann.py", "--model", relative(args.model)]
            + ["--data", relative(args.data), "--users", str(args.users)]
            + ["--nprobe", *map(str, args.nprobe)]
            + (["--hnsw", "--ef-search", *map(str, args.ef_search)] * args.hnsw)
            + ["--name", args.name]
        ),
    }
    lines = [
        "# ANN index: recall@10 against brute force, and search latency\n",
        f"{num_items:,} items, {len(queries):,} users of `{relative(args.data)}`; "
        "one thread, "
        "one query at a time (the search alone, not the embedding).\n",
        "| index | setting | recall@10 | p50 ms | p99 ms | build s |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['index']} | {r['setting']} | {r['recall_at_10']:.3f} | "
        f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['build_s']:.0f} |"
        for r in rows
    ]
    lines.append(f"\nCommand: `{results['command']}`\n")
    write_results(args.name, results, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

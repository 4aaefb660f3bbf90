"""Recall and latency of the ANN index against brute force, at several settings.

For an export (MODEL_BASE/<version>) and the users of a dataset, asks the
export's own `top_k` signature (brute force in the graph) for each user's exact
top 10, and then, for each IVF `nprobe` and each HNSW
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

from genni.pipeline import quiet
from research.commands import relative, shell_line


def measure(index, queries, excluded, exact, strings) -> dict:
    """Recall@10 against `exact` (item-id strings) and per-query latency of
    `index` (ids 1..N, named by `strings`), one query at a time."""
    times, found = [], []
    for q, seen in zip(queries, excluded, strict=True):
        start = time.perf_counter()
        _, ids = index.search(q[None, :], 10 + len(seen))
        times.append(time.perf_counter() - start)
        found.append([strings[i] for i in ids[0] if i > 0 and i not in seen][:10])
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
    top_k = model.signatures[export.SIGNATURE_TOP_K]
    queries, exact, brute = [], [], 0.0
    for start in range(0, len(histories), 256):
        rows = histories[start : start + 256]
        width = max(map(len, rows))
        batch = np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)
        history = tf.constant(batch, dtype=tf.string)
        queries.append(embed(history=history)[export.EMBEDDING].numpy())
        begin = time.perf_counter()
        exact.append(top_k(history=history, k=tf.constant(10))[export.ITEM_IDS].numpy())
        brute += time.perf_counter() - begin
    queries = np.ascontiguousarray(np.concatenate(queries), dtype=np.float32)
    exact = np.concatenate(exact)
    strings = model.item_strings.numpy()
    excluded = [
        {ids[h.encode()] for h in row if h.encode() in ids}
        if settings["candidates"] == "new"
        else set()
        for row in histories
    ]
    brute_ms = 1000 * brute / len(queries)
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
                | measure(index, queries, excluded, exact, strings)
                | {"build_s": build}
            )
            print(rows[-1], flush=True)
    results = {
        "model": args.model,
        "items": int(num_items),
        "users": len(queries),
        "candidates": settings["candidates"],
        "brute_force_top_k_ms_per_user": brute_ms,
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

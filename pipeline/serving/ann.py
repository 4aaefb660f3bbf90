"""Approximate top-K for large catalogs: `user_embedding`, then a faiss index.

The export's `top_k` ranks by brute force in the graph: every request reads the
whole item table (256 MiB at 10^6 items of 64 floats), so its latency grows with
the catalog (`benchmarks/results/scale.md`). An approximate nearest-neighbour
index over the item table reads a small part of it instead:

- `genni ann-index --model MODEL_BASE/<version>` builds a faiss index (inner
  product, the model's own score) into the export's `assets.extra/ann/`. TF
  Serving ignores `assets.extra`, so the SavedModel it loads is unchanged.
- `genni serve --ann` then answers `serving_default` and `top_k` from it: the
  SavedModel's `user_embedding` signature, then the index. The other
  signatures, the API and the errors are those of `genni serve`.
- On TF Serving, the same split: its replicas serve `user_embedding`, and the
  index (`items.faiss`, or any vector database loaded from the same item table)
  serves the search.

Answers keep the export's contract (`genni.pipeline.serving.export`): raw ids
in and out, padding never answered, under "new" no item of the history (the
index is asked for k more items than the history holds), a history with no
known item (or a non-finite embedding) gets the most popular items. They are
approximate: `recall@10` against brute force is measured, not assumed
(`benchmarks/ann.py`). An IVF index probes `nprobe` of its `nlist` clusters
and may return fewer than k items when those hold fewer; `num_results` says
how many are real, as it does for brute force.

Kinds: "ivf" (default: k-means clusters, `nlist` about sqrt(N), quick to build)
and "hnsw" (a graph: faster searches, slower to build). How much of the exact
top 10 each finds, and how fast: `benchmarks/ann.py`.
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import tensorflow as tf

from genni.components import metrics
from genni.pipeline import atomic
from genni.pipeline.serving import export

ANN_DIR = os.path.join("assets.extra", "ann")
INDEX_FILE = "items.faiss"
META_FILE = "ann.json"
KINDS = ("ivf", "hnsw")
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
# Training points per IVF cluster (faiss warns under 39).
IVF_POINTS_PER_CLUSTER = 64


def _faiss():
    try:
        import faiss
    except ImportError as e:  # An optional dependency: `pip install genni[ann]`.
        raise ImportError(
            "Approximate top-K needs faiss: pip install 'faiss-cpu' (or genni[ann])."
        ) from e
    return faiss


def item_table(model: tf.Module) -> np.ndarray:
    """The export's [num_items + 1, d] item table (row 0: padding), float32."""
    table = getattr(model, "item_table", None)
    if table is None:  # Exports from before `item_table` was a named variable.
        try:
            table = model.encoder.item_embedding.embeddings
        except AttributeError as e:
            raise ValueError("not a GenNi export: no item table found") from e
    return np.ascontiguousarray(table.numpy(), dtype=np.float32)


def default_nlist(num_items: int) -> int:
    """IVF clusters: about sqrt(N), at least 1, at most N / 39."""
    return int(max(1, min(round(math.sqrt(num_items)), num_items // 39 or 1)))


def default_nprobe(nlist: int) -> int:
    """Clusters probed per query: a quarter of them, at least 8 (or all).

    The recall and latency of other shares: `benchmarks/ann.py`,
    `benchmarks/results/ann_1e6.md`.
    """
    return int(min(nlist, max(8, nlist // 4)))


def new_index(
    vectors: np.ndarray,
    kind: str = "ivf",
    nlist: int | None = None,
    nprobe: int | None = None,
    seed: int = 0,
):
    """A faiss index of `vectors` (items 1..N in order), ids 1..N, and its
    settings. Uses every core to build; the caller sets the search threads."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}. Got {kind!r}.")
    faiss = _faiss()
    num_items, dim = vectors.shape
    if kind == "ivf":
        nlist = nlist or default_nlist(num_items)
        if not 1 <= nlist <= num_items:
            raise ValueError(f"`nlist` must be between 1 and {num_items}; got {nlist}.")
        nprobe = nprobe or default_nprobe(nlist)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = min(num_items, nlist * IVF_POINTS_PER_CLUSTER)
        rows = np.random.default_rng(seed).choice(num_items, sample, replace=False)
        index.cp.seed = seed
        index.train(vectors[np.sort(rows)])
        index.nprobe = nprobe
        params = {"nlist": nlist, "nprobe": nprobe}
    else:
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        params = {"m": HNSW_M, "ef_search": HNSW_EF_SEARCH}
    index = faiss.IndexIDMap2(index)
    index.add_with_ids(vectors, np.arange(1, num_items + 1, dtype=np.int64))
    return index, params


def build(
    model_dir: str,
    kind: str = "ivf",
    nlist: int | None = None,
    nprobe: int | None = None,
    seed: int = 0,
    log=print,
) -> dict:
    """Build the index of the export at `model_dir` into its ANN_DIR.

    Returns the index's metadata (also written to ANN_DIR/META_FILE). Items
    keep their ids (1..N) in the index; padding is not indexed.
    """
    faiss = _faiss()
    if not os.path.exists(os.path.join(model_dir, "saved_model.pb")):
        raise FileNotFoundError(
            f"{model_dir!r} holds no SavedModel: pass one export version, "
            "MODEL_BASE/<version> (e.g. models/genni/1)."
        )
    settings = export.read_settings(model_dir)
    model = tf.saved_model.load(model_dir)
    table = item_table(model)
    vectors = table[1:]
    num_items, dim = vectors.shape
    if not np.isfinite(vectors).all():
        raise ValueError(f"{model_dir!r}: the item table has non-finite values.")
    start = time.perf_counter()
    index, params = new_index(vectors, kind, nlist, nprobe, seed)
    seconds = time.perf_counter() - start
    meta = {
        "kind": kind,
        **params,
        "num_items": int(num_items),
        "dim": int(dim),
        "candidates": settings["candidates"],
        "k": settings["k"],
        "build_seconds": round(seconds, 3),
        "faiss": faiss.__version__,
    }
    target = os.path.join(model_dir, ANN_DIR)
    staging = f"{target}.staging-{os.getpid()}"
    with atomic.staged(target, staging, replace=True):
        os.makedirs(staging)
        faiss.write_index(index, os.path.join(staging, INDEX_FILE))
        with open(os.path.join(staging, META_FILE), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
    log(
        f"Indexed {num_items:,} items ({kind}, "
        + ", ".join(f"{k} {v}" for k, v in params.items())
        + f") in {seconds:.1f} s -> {target}"
    )
    return meta


def has_index(model_dir: str) -> bool:
    return os.path.exists(os.path.join(model_dir, ANN_DIR, INDEX_FILE))


class AnnIndex:
    """A loaded index, answering as the export's `top_k` signature does."""

    def __init__(self, model_dir: str, model: tf.Module | None = None):
        if not has_index(model_dir):
            raise FileNotFoundError(
                f"{model_dir!r} has no ANN index: build one with "
                f"`genni ann-index --model {model_dir}`."
            )
        faiss = _faiss()
        # One thread per search: a server runs requests side by side, and
        # OpenMP teams per request would fight over the cores.
        faiss.omp_set_num_threads(1)
        with open(os.path.join(model_dir, ANN_DIR, META_FILE), encoding="utf-8") as f:
            self.meta = json.load(f)
        self.index = faiss.read_index(os.path.join(model_dir, ANN_DIR, INDEX_FILE))
        self.model = model if model is not None else tf.saved_model.load(model_dir)
        strings = self.model.item_strings.numpy()
        if len(strings) - 1 != self.meta["num_items"]:
            raise ValueError(
                f"{model_dir!r}: the ANN index has {self.meta['num_items']:,} items, "
                f"the model {len(strings) - 1:,}; rebuild it with `genni ann-index`."
            )
        self.strings = strings.astype(object)
        self.ids = {s: i for i, s in enumerate(strings) if i}
        # The graph's fallback: log1p of the counts, padding (row 0) left out.
        self.popularity = self.model.popularity.numpy()
        self.popular = np.argsort(-self.popularity[1:], kind="stable") + 1
        self.candidates = self.meta["candidates"]
        self.default_k = self.meta["k"]
        self.embed = self.model.signatures[export.SIGNATURE_EMBEDDING]
        if self.meta["kind"] == "ivf":
            faiss.extract_index_ivf(self.index).nprobe = self.meta["nprobe"]
        else:
            graph = faiss.downcast_index(self.index.index).hnsw
            graph.efSearch = self.meta["ef_search"]

    def top_k(self, history: np.ndarray, k: int | None = None) -> dict[str, np.ndarray]:
        """`top_k`'s outputs for `history` ([B, L] strings, "" padding)."""
        k = int(min(max(1, self.default_k if k is None else k), len(self.ids)))
        history = np.asarray(history, dtype=object)
        embedding = self.embed(history=tf.constant(history, dtype=tf.string))
        queries = np.ascontiguousarray(
            embedding[export.EMBEDDING].numpy(), dtype=np.float32
        )
        raw = [[_bytes(h) for h in row] for row in history]
        known = [[self.ids[h] for h in row if h in self.ids] for row in raw]
        # The one rule of what a ranking leaves out (padding, and under "new"
        # the history), as the graph applies it.
        flat = np.fromiter((i for row in known for i in row), np.int64)
        rows = tf.RaggedTensor.from_row_lengths(flat, [len(row) for row in known])
        left_out = metrics.left_out(rows, self.candidates)
        excluded = [set(row) for row in left_out.to_list()]
        fetch = k + max(len(e) for e in excluded)
        ok = np.isfinite(queries).all(axis=1)
        scores, found = self.index.search(np.where(ok[:, None], queries, 0), fetch)
        item_ids = np.full((len(history), k), b"", dtype=object)
        values = np.full((len(history), k), export.NEG_INF, dtype=np.float32)
        counts = np.zeros(len(history), dtype=np.int32)
        for b, row in enumerate(found):
            if known[b] and ok[b]:
                keep = [
                    (i, s)
                    for i, s in zip(row, scores[b], strict=True)
                    if i >= 0 and i not in excluded[b]  # -1: none found.
                ][:k]
            else:  # No known item: the popularity fallback, as in the graph.
                keep = [
                    (i, self.popularity[i])
                    for i in self.popular[: k + len(excluded[b]) + 1]
                    if i not in excluded[b]
                ][:k]
            counts[b] = len(keep)
            for j, (i, s) in enumerate(keep):
                item_ids[b, j], values[b, j] = self.strings[i], s
        return {
            export.ITEM_IDS: item_ids,
            export.SCORES: values,
            export.NUM_RESULTS: counts,
        }


class AnnSignature:
    """`serving_default` or `top_k` answered by an `AnnIndex`: the inputs and
    outputs of the SavedModel's signature, for `genni serve --ann`."""

    def __init__(self, index: AnnIndex, original):
        self.index = index
        self.structured_input_signature = original.structured_input_signature
        self.structured_outputs = original.structured_outputs

    def __call__(self, history: tf.Tensor, k: tf.Tensor | None = None) -> dict:
        k = None if k is None else int(k.numpy())
        outputs = self.index.top_k(history.numpy(), k)
        return {name: tf.constant(value) for name, value in outputs.items()}


class AnnModel:
    """A loaded export whose top-K signatures answer from its ANN index; the
    rest (other signatures, variables) is the SavedModel's own."""

    def __init__(self, model: tf.Module, model_dir: str):
        self._model = model
        self.index = AnnIndex(model_dir, model)
        self.signatures = dict(model.signatures)
        for name in ("serving_default", export.SIGNATURE_TOP_K):
            self.signatures[name] = AnnSignature(self.index, model.signatures[name])

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def _bytes(item: str | bytes) -> bytes:
    return item if isinstance(item, bytes) else item.encode("utf-8")


def recall_at_k(approximate: np.ndarray, exact: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's exact top k found in its approximate top k."""
    shares = []
    for a, e in zip(approximate, exact, strict=True):
        truth = {x for x in e[:k] if x}
        if truth:
            shares.append(len(truth & set(a[:k])) / len(truth))
    return float(np.mean(shares)) if shares else float("nan")

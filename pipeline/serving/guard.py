"""A model reaches serving only if it is at least as good as the one serving now.

The guarded export (`genni export --against MODEL_BASE`), after TFX's Evaluator
"blessing": the candidate run is exported into a staging directory inside
`--output`, and both it and the version serving now (the highest version of
MODEL_BASE, as TF Serving's default policy picks) are evaluated the same way,
through their `top_k` signatures, on the same data split (full ranking: every
item is ranked, under each SavedModel's own candidate rule). The candidate is
moved into place as the next version only if its NDCG@10 is not worse than the
served one's by more than `max_regression` points; with no version serving yet,
it is published. Either way the decision is appended to
MODEL_BASE/`DECISIONS_FILE` (one JSON line), and a published version carries
its own copy in `assets.extra/` (TF Serving ignores that folder's other files).
"""

from __future__ import annotations

import datetime
import json
import os
import uuid

import numpy as np
import tensorflow as tf

from genni.components import schema
from genni.components.metrics import RankingAccumulator
from genni.pipeline import atomic
from genni.pipeline.serving import export
from genni.pipeline.training import data, evaluate, rundir, train

METRIC = "NDCG@10"
DECISIONS_FILE = "decisions.jsonl"
DECISION_ASSET = os.path.join("assets.extra", "genni_decision.json")
EVAL_BATCH_SIZE = 256


def served_version(base: str) -> int | None:
    """The version TF Serving serves from `base` by default: the highest one
    holding a SavedModel (None if there is none)."""
    if not os.path.isdir(base):
        return None
    versions = [
        int(v)
        for v in os.listdir(base)
        if v.isdigit()
        and os.path.exists(os.path.join(base, v, "saved_model.pb"))
        and int(v) > 0
    ]
    return max(versions, default=None)


def savedmodel_metrics(path: str, data_dir: str, split: str) -> dict[str, float]:
    """Full-ranking metrics (%) of the SavedModel at `path` on `split` of
    `data_dir`, asked as it serves: raw-id histories into `top_k`.

    The target's rank is its position in the served ranking of every item; a
    target the model does not rank (a history item under "new", an item unknown
    to its vocabulary) is a miss.
    """
    top_k = top_k_signature(path)
    dataset = data.Dataset.open(data_dir)
    raw = np.array(dataset.ids(schema.ITEMS_FILE), dtype=object)
    accumulator = RankingAccumulator()
    batch_size = min(EVAL_BATCH_SIZE, evaluate.eval_batch_size(dataset.num_items))
    for features in dataset.batches(split, batch_size):
        # The whole history, as a client sends it: the model encodes its last
        # max_len items and, under "new", leaves all of them out of the ranking.
        history = raw[features[schema.HISTORY].to_tensor().numpy()]  # Pad: "".
        targets = raw[features[schema.TARGET].numpy()]
        accumulator.update(served_ranks(top_k, history, targets))
    return accumulator.result()


def top_k_signature(path: str):
    """The `top_k` signature of the SavedModel at `path`."""
    model = tf.saved_model.load(path)
    if export.SIGNATURE_TOP_K not in model.signatures:
        raise ValueError(f"{path!r} has no {export.SIGNATURE_TOP_K!r} signature.")
    return model.signatures[export.SIGNATURE_TOP_K]


def served_ranks(top_k, histories: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """0-based rank of each raw target among what `top_k` serves for its raw
    history ([B, L] strings, "" padding): the whole served ranking; a target it
    does not rank (unknown, or a history item under "new") ranks last."""
    return served_rankings(top_k, histories, targets)[0]


def served_rankings(top_k, histories: np.ndarray, targets: np.ndarray) -> tuple:
    """`served_ranks`, and the served ranking itself: (ranks [B], item ids
    [B, |V|] as bytes, "" past each row's `num_results`)."""
    everything = tf.constant(np.iinfo(np.int32).max, tf.int32)  # Clipped to |V|.
    histories = np.asarray(histories, dtype=object).astype(bytes)
    targets = np.asarray(targets, dtype=object).astype(bytes)
    out = top_k(history=tf.constant(histories), k=everything)
    ids = out[export.ITEM_IDS].numpy()
    num_results = out[export.NUM_RESULTS].numpy()
    real = np.arange(ids.shape[1])[None, :] < num_results[:, None]
    found = (ids == targets[:, None]) & real
    ranks = np.where(found.any(axis=1), found.argmax(axis=1), ids.shape[1])
    return ranks, np.where(real, ids, b"")


def _record(base: str, decision: dict) -> None:
    line = json.dumps(decision, sort_keys=True) + "\n"
    with open(os.path.join(base, DECISIONS_FILE), "a", encoding="utf-8") as f:
        f.write(line)


def guarded_export(
    run_dir: str,
    base: str,
    *,
    against: str,
    max_regression: float = 0.0,
    split: str = schema.VALID,
    k: int = export.DEFAULT_K,
    data_dir: str | None = None,
    candidates: str | None = None,
    version: int | None = None,
    log=print,
) -> dict:
    """Export `run_dir` to `base` only if it is not worse than what `against`
    serves by more than `max_regression` NDCG@10 points on `split`.

    Returns the decision (also appended to `base`/DECISIONS_FILE): "published"
    with the new version's path, or "refused".
    """
    if max_regression < 0:
        raise ValueError(
            f"`max_regression` must be non-negative. Got {max_regression}."
        )
    if split not in schema.SPLITS[1:]:
        raise ValueError(f"`split` must be one of {schema.SPLITS[1:]}. Got {split!r}.")
    if not rundir.finished(run_dir):  # Never published: its best may be stale.
        raise ValueError(rundir.unfinished_message(run_dir) + ".")
    data_dir = data_dir or train.read_config(run_dir).data
    os.makedirs(base, exist_ok=True)
    scratch = os.path.join(base, f".candidate-{uuid.uuid4().hex[:8]}")
    try:
        candidate_path = export.export(
            run_dir, scratch, version=1, k=k, data_dir=data_dir, candidates=candidates
        )
        log(f"Evaluating the candidate {run_dir} on {split} ...")
        candidate = savedmodel_metrics(candidate_path, data_dir, split)
        served = served_version(against)
        decision = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "run": run_dir,
            "data": data_dir,
            "split": split,
            "metric": METRIC,
            "max_regression": max_regression,
            "k": k,
            "candidates": candidates,
            "candidate": round(candidate[METRIC], 4),
            "against": against,
            "served_version": served,
            "served": None,
        }
        if served is None:
            decision["decision"] = "published"
            decision["why"] = "no version serving yet"
        else:
            served_path = os.path.join(against, str(served))
            log(f"Evaluating served version {served} of {against} on {split} ...")
            decision["served"] = round(
                savedmodel_metrics(served_path, data_dir, split)[METRIC], 4
            )
            gap = decision["candidate"] - decision["served"]
            ok = gap >= -max_regression
            decision["decision"] = "published" if ok else "refused"
            decision["why"] = (
                f"candidate {METRIC} {decision['candidate']:.2f} vs served "
                f"{decision['served']:.2f} ({gap:+.2f}; allowed regression "
                f"{max_regression:.2f})"
            )
        if decision["decision"] == "published":
            version = version if version is not None else export.next_version(base)
            final = os.path.join(base, str(version))
            if os.path.exists(final):
                raise FileExistsError(f"{final!r} exists; choose another --version.")
            decision["version"] = version
            decision["path"] = final
            asset = os.path.join(candidate_path, DECISION_ASSET)
            os.makedirs(os.path.dirname(asset), exist_ok=True)
            with open(asset, "w", encoding="utf-8") as f:
                json.dump(decision, f, indent=2, sort_keys=True)
            atomic.move_into_place(candidate_path, final)
        _record(base, decision)
        return decision
    finally:
        atomic.remove(scratch)

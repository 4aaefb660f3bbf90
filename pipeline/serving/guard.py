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


def savedmodel_metrics(
    path: str, data_dir: str, split: str, top_k=None
) -> dict[str, float]:
    """Full-ranking metrics (%) of the SavedModel at `path` on `split` of
    `data_dir`, asked as it serves: raw-id histories into `top_k` (its
    `top_k_signature`, loaded unless given).

    The target's rank is its position in the served ranking of every item; a
    target the model does not rank (a history item under "new", an item unknown
    to its vocabulary) is a miss.
    """
    top_k = top_k or top_k_signature(path)
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


def record_decision(base: str, decision: dict) -> None:
    """Append `decision` to `base`/DECISIONS_FILE (one JSON line)."""
    line = json.dumps(decision, sort_keys=True) + "\n"
    with open(os.path.join(base, DECISIONS_FILE), "a", encoding="utf-8") as f:
        f.write(line)


BASELINES = ("popular", "none")


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
    baseline: str = "popular",
    refit: str | None = None,
    log=print,
) -> dict:
    """Export `run_dir` to `base` only if it beats the popularity ranking
    (`baseline`) and is not worse than what `against` serves by more than
    `max_regression` NDCG@10 points on `split`. The popularity floor holds on
    the other held-out split too, when it holds enough cases (`_other_window`).

    The candidate is refused before it is measured when its run's validation
    never ranked a target in the top 10 (`metrics.json`: no signal) or when
    `split` holds fewer scoreable cases than its dataset asks for
    (`windows.short_windows`). `baseline` "popular": the popularity ranking
    of the run's training events (`export.export_popular`), asked the same
    way, must be beaten; the first version too. While no version serves, a
    refused candidate leaves that ranking serving as the first version (the
    decision's `fallback`), so that a model base always answers and never
    worse than "most popular".

    `refit`: a run of the same settings trained on every event up to the
    log's end (`genni pipeline`'s `export: {refit: true}`): `run_dir` is
    judged (it has not seen `split`), and `refit` is what is published. A
    served version that was a refit is judged by its own judged run.

    Returns the decision (also appended to `base`/DECISIONS_FILE): "published"
    with the new version's path, or "refused" (with `fallback` when the
    popularity ranking was published in its place).
    """
    if max_regression < 0:
        raise ValueError(
            f"`max_regression` must be non-negative. Got {max_regression}."
        )
    if split not in schema.SPLITS[1:]:
        raise ValueError(f"`split` must be one of {schema.SPLITS[1:]}. Got {split!r}.")
    if baseline not in BASELINES:
        raise ValueError(f"`baseline` must be one of {BASELINES}. Got {baseline!r}.")
    for run in (run_dir, refit):
        if run and not rundir.finished(run):  # Never published: stale best.
            raise ValueError(rundir.unfinished_message(run) + ".")
    config = train.read_config(run_dir)
    data_dir = data_dir or config.data
    rule = candidates or config.candidates  # (`candidates` is recorded as given.)
    os.makedirs(base, exist_ok=True)
    scratch = os.path.join(base, f".candidate-{uuid.uuid4().hex[:8]}")
    served = served_version(against)
    decision = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "run": refit or run_dir,
        "judged_run": run_dir,
        "data": data_dir,
        "split": split,
        "metric": METRIC,
        "max_regression": max_regression,
        "k": k,
        "candidates": candidates,
        "baseline": baseline,
        "refit": refit is not None,
        "candidate": None,
        "popular": None,
        "floor": {},
        "against": against,
        "served_version": served,
        "served": None,
    }
    loaded: dict = {}
    try:
        stats = rundir.read_json(os.path.join(data_dir, schema.STATS_FILE))
        why_not = _unjudgeable(run_dir, stats, split)
        if why_not is None:
            candidate_path = export.export(
                run_dir,
                scratch,
                version=1,
                k=k,
                data_dir=data_dir,
                candidates=rule,
            )
            log(f"Evaluating the candidate {run_dir} on {split} ...")
            decision["candidate"] = _score(candidate_path, data_dir, split, loaded)
            if baseline == "popular":
                popular_path = export.export_popular(
                    data_dir, scratch, version=2, k=k, candidates=rule
                )
                decision["popular"] = _score(popular_path, data_dir, split, loaded)
                other = _other_window(stats, split)
                if other is not None:  # The floor holds on both windows.
                    decision["floor"] = {
                        other: {
                            "candidate": _score(
                                candidate_path, data_dir, other, loaded
                            ),
                            "popular": _score(popular_path, data_dir, other, loaded),
                        }
                    }
            if served is not None:
                served_path = os.path.join(against, str(served))
                judge = _judge_of(served_path, scratch, k, rule)
                log(f"Evaluating served version {served} of {against} on {split} ...")
                decision["served"] = _score(judge, data_dir, split, loaded)
            why_not = _verdict(decision)
        decision["decision"] = "refused" if why_not else "published"
        decision["why"] = why_not or _numbers(decision)
        if why_not is None:
            path = (
                export.export(refit, scratch, version=3, k=k, candidates=rule)
                if refit
                else candidate_path
            )
            decision.update(publish(path, base, version, decision))
        elif served is None and baseline == "popular":
            # Nothing serves: the popularity ranking does, until a model beats it.
            path = export.export_popular(  # Every event, with a refit.
                train.read_config(refit).data if refit else data_dir,
                scratch,
                version=4,
                k=k,
                candidates=rule,
            )
            fallback = {**decision, "decision": "fallback", "run": None}
            decision.update(publish(path, base, version, fallback))
            decision["fallback"] = "popular"
            decision["why"] += "; the popularity ranking serves instead"
        record_decision(base, decision)
        return decision
    finally:
        atomic.remove(scratch)


def _score(path: str, data_dir: str, split: str, loaded: dict) -> float:
    """METRIC of the SavedModel at `path` on `split`; `loaded`: the
    signatures loaded so far, by path (each export is loaded once)."""
    if path not in loaded:
        loaded[path] = top_k_signature(path)
    top_k = loaded[path]
    return round(savedmodel_metrics(path, data_dir, split, top_k)[METRIC], 4)


def _other_window(stats: dict, split: str) -> str | None:
    """The other held-out split, when it holds scoreable cases and is not
    below its dataset's `min_cases`: the popularity floor is checked there
    too (the run's epoch was chosen on valid; test it never saw)."""
    from genni.pipeline.preprocess import windows

    other = schema.TEST if split == schema.VALID else schema.VALID
    if stats.get("time_split"):
        if not windows.scoreable(stats, other) or other in windows.short_windows(stats):
            return None
    elif not stats["examples"][other]:
        return None
    return other


def _unjudgeable(run_dir: str, stats: dict, split: str) -> str | None:
    """Why `run_dir` is refused before it is measured, or None."""
    from genni.pipeline.preprocess import windows

    metrics = rundir.read_json(os.path.join(run_dir, rundir.METRICS_FILE))
    if not metrics.get("validation_signal", True):
        return train.no_signal_message(metrics)
    if split in windows.short_windows(stats):
        return (
            f"too few cases to judge on {split}: {windows.describe(stats)}; at "
            f"least {stats['time_split']['min_cases']:,} scoreable cases asked"
        )
    return None


def _verdict(decision: dict) -> str | None:
    """Why the measured candidate is refused, or None to publish it."""
    candidate, popular = decision["candidate"], decision["popular"]
    if popular is not None and not candidate > popular:
        return (
            f"candidate {METRIC} {candidate:.2f} does not beat the popularity "
            f"ranking's {popular:.2f}"
        )
    for other, scores in decision["floor"].items():
        if not scores["candidate"] > scores["popular"]:
            return (
                f"candidate {METRIC} {scores['candidate']:.2f} on {other} does not "
                f"beat the popularity ranking's {scores['popular']:.2f} (on "
                f"{decision['split']}: {candidate:.2f} vs {popular:.2f})"
            )
    served = decision["served"]
    if served is not None and candidate - served < -decision["max_regression"]:
        return _numbers(decision)
    return None


def _numbers(decision: dict) -> str:
    """'candidate NDCG@10 5.10 vs served 4.90 (+0.20; ...), popular 2.00'."""
    candidate, served = decision["candidate"], decision["served"]
    if served is None:
        text = "no version serving yet"
    else:
        text = (
            f"candidate {METRIC} {candidate:.2f} vs served {served:.2f} "
            f"({candidate - served:+.2f}; allowed regression "
            f"{decision['max_regression']:.2f})"
        )
    if decision["popular"] is not None:
        text += (
            f"; candidate {candidate:.2f} vs the popularity ranking "
            f"{decision['popular']:.2f}"
        )
    return text


def _judge_of(served_path, scratch, k, candidates) -> str:
    """What stands for the served version: itself, or, when it is a refit,
    an export of the run it was judged by (a refit has learned every
    window, so it cannot be measured on one)."""
    recorded = decision_of(served_path)
    judged = recorded.get("judged_run")
    if recorded.get("refit") and judged and rundir.finished(judged):
        return export.export(judged, scratch, version=5, k=k, candidates=candidates)
    return served_path


def decision_of(path: str) -> dict:
    """The decision that published the version at `path` (its
    DECISION_ASSET), or {} for a version published without one."""
    return export.read_asset(path, DECISION_ASSET)


def publish(path: str, base: str, version: int | None, decision: dict) -> dict:
    """Move the export at `path` into place as the next version of `base`
    (or `version`), with `decision` (and where it went) as its asset."""
    version = version if version is not None else export.next_version(base)
    final = os.path.join(base, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final!r} exists; choose another --version.")
    where = {"version": version, "path": final}
    export.write_asset(path, DECISION_ASSET, {**decision, **where})
    atomic.move_into_place(path, final)
    return where

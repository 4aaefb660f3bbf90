"""`genni add-items`: items served on the day they are listed, nothing retrained.

A run with an item tower (`genni train --item-tower`) scores an item without
a trained ID row by the mean of its attributes' trained rows
(`genni.models.item_tower`). Given an items file (any layout `genni
preprocess --item-attributes` reads), `add_items` writes the next version of
a model base from the run its served version was exported from: the trained
part as served, the catalog grown by the file's items the version does not
serve yet, each one's vector the mean of its attributes' trained rows.
`genni serve` picks the version up as any other (TF Serving's policy: the
highest); REST, gRPC, `genni batch-recommend` and, where the served version
had one, its ANN index (built again for the new version) see the new items.
The SavedModel is `genni export`'s (core ops only).

- An attribute no trained item holds has no trained row: it is left out, and
  an item none of whose attributes is known is served with the zero vector
  (it scores 0; counted as `unknown_attributes`).
- The items file must list every item the served version lists, with the
  same attributes: one that drops a listed item or changes its attributes is
  refused unless `allow_changes`. Then a changed item is served with its new
  attributes (a trained item keeps its ID row) and a dropped one stays served
  (no version removes an item: neither does a retrain on a catalog without
  it, whose log still holds its events).

What is checked before the version is published, in place of the guard's
judgement (the guard judged the trained part when it was published; the new
items have no cases to be judged on until the log holds events of them, and
the next retrain's guard judges them with the rest):

- every item the served version serves keeps its vector, unless the file
  changed its attributes, and the encoder is the served one: the new
  version's answers rank the served items as the served version does (the
  same top-K among them, checked on histories of served items);
- every vector is finite.

The decision is appended to MODEL_BASE/decisions.jsonl (`"kind": "catalog"`)
and the version carries it, with the items it added (`CATALOG_ASSET`), so
that the next `add_items` grows from it.
"""

from __future__ import annotations

import datetime
import os
import uuid

import numpy as np
import tensorflow as tf

from genni.components import schema
from genni.models.item_tower import MAX_ATTRIBUTES
from genni.pipeline import atomic
from genni.pipeline.preprocess.catalog import read_catalog
from genni.pipeline.serving import ann, export, guard
from genni.pipeline.training import data, rundir, train

CATALOG_ASSET = os.path.join("assets.extra", "genni_catalog.json")
CHECK_HISTORIES = 64  # Served items asked as one-item histories by the check,
CHECK_K = 200  # for their top-K,
SCORE_TOLERANCE = 1e-5  # whose scores may differ by float32 rounding.


def served_catalog(
    path: str, run_dir: str, dataset: data.Dataset
) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    """What the version at `path`, exported from `run_dir` (on `dataset`),
    serves: the items it adds to the dataset's, in order, every listed item's
    attributes (strings), and the dataset's own catalog."""
    items = dataset.ids(schema.ITEMS_FILE)
    original = {
        items[int(i)]: [str(a) for a in values]
        for i, values in (dataset.item_attributes() or {}).items()
    }
    recorded = export.read_asset(path, CATALOG_ASSET)
    if recorded.get("run") != run_dir:
        return [], dict(original), original
    return list(recorded["added"]), original | recorded["listed"], original


def add_items(
    base: str,
    items_file: str,
    *,
    run_dir: str | None = None,
    version: int | None = None,
    allow_changes: bool = False,
    log=print,
) -> dict:
    """Publish the served version of `base` with the catalog of `items_file`
    (see the module); returns the decision, with the new version's path.

    `run_dir`: the run the served version was exported from (default: the
    one its publication recorded). ValueError, with the reason, where no
    version can be written: no trained model serving, a run without an item
    tower, a file that drops or changes served items, nothing new to add.
    """
    served = guard.served_version(base)
    if served is None:
        raise ValueError(f"{base!r} serves no version: export a run first.")
    served_path = os.path.join(base, str(served))
    settings = export.read_settings(served_path)
    if settings.get("model") == export.POPULAR:
        raise ValueError(
            f"Version {served} of {base!r} is the popularity ranking: no trained "
            "model serves, so no item tower scores new items."
        )
    run_dir = run_dir or _served_run(served_path)
    if run_dir is None:
        raise ValueError(
            f"Version {served} of {base!r} does not record its run (a plain "
            "`genni export`): pass the run it was exported from (--run)."
        )
    if not rundir.finished(run_dir):
        raise ValueError(rundir.unfinished_message(run_dir) + ".")
    config = train.read_config(run_dir)
    if not config.model.item_tower:
        raise ValueError(
            f"{run_dir!r} knows items by their IDs alone: only a run trained with "
            "--item-tower scores an item it never trained on."
        )
    dataset = data.Dataset.open(config.data)
    trained = dataset.ids(schema.ITEMS_FILE)[1:]
    added, listed, original = served_catalog(served_path, run_dir, dataset)
    serving = trained + added
    if settings["num_items"] != len(serving):
        raise ValueError(
            f"Version {served} of {base!r} serves {settings['num_items']:,} items, "
            f"{run_dir!r} and the versions before it {len(serving):,}: was it "
            "exported from another run? Pass --run."
        )
    catalog = read_catalog(items_file)
    wanted = {item: [str(a) for a in values] for item, values in catalog.items.items()}
    dropped = sorted(item for item in listed if item not in wanted)
    # Listed otherwise, or listed now where it was not (a trained item's
    # vector holds its attributes either way).
    changed = sorted(
        item
        for item in serving
        if item in wanted and not _same(wanted[item], listed.get(item, []))
    )
    if (dropped or changed) and not allow_changes:
        raise ValueError(
            f"{items_file!r} drops {len(dropped):,} of the items version {served} "
            f"lists ({_some(dropped)}) and changes the attributes of "
            f"{len(changed):,} ({_some(changed)}): pass --allow-changes to serve "
            "the changed ones with their new attributes (dropped ones stay served)."
        )
    known = set(serving)
    new = [item for item in wanted if item not in known]
    if not new and not changed:
        raise ValueError(
            f"{items_file!r} lists no item version {served} does not serve already."
        )
    # Each served item's attributes from now on: the file's, or (dropped)
    # what it was listed with.
    current = listed | wanted
    model = train.load_run(run_dir, dataset=dataset)
    tower = model.encoder.item_tower
    # Attribute rows training reached (`item_features` leaves the others out).
    reached = set(tower.pairs.numpy()[:, 1].tolist())
    rows = {n: i for i, n in enumerate(tower.names, start=1) if i in reached}
    attribute_rows = tower.attribute_embedding.embeddings.numpy()
    table = model.encoder.item_embeddings.numpy()
    id_part = table - tower.attribute_vectors().numpy()

    def attribute_mean(values: list[str]) -> np.ndarray:
        values = list(dict.fromkeys(values))[:MAX_ATTRIBUTES]
        ids = [rows[v] for v in values if v in rows]
        if not ids:
            return np.zeros(table.shape[1], np.float32)
        return attribute_rows[ids].mean(axis=0)

    serving_after = serving + new
    vectors = np.zeros((len(serving_after) + 1, table.shape[1]), np.float32)
    vectors[: len(trained) + 1] = table
    for n, item in enumerate(serving_after, start=1):
        if n > len(trained):  # Scored by its attributes alone.
            vectors[n] = attribute_mean(current.get(item, []))
        elif item in current and not _same(current[item], original.get(item, [])):
            # Trained with other attributes: its ID row and its new ones.
            vectors[n] = id_part[n] + attribute_mean(current[item])
    unknown = sum(not any(v in rows for v in wanted[item]) for item in new)
    if not np.isfinite(vectors).all():
        raise ValueError(f"{run_dir!r}: non-finite item vectors; nothing published.")
    counts = np.zeros(len(serving_after) + 1, np.int64)
    counts[: len(trained) + 1] = dataset.item_counts()
    module = export.ServingModule(
        model,
        serving_after,
        counts,
        dataset.max_len,
        settings["k"],
        settings["candidates"],
        item_table=vectors,
    )
    served_decision = guard.decision_of(served_path)  # What judged it.
    scratch = os.path.join(base, f".catalog-{uuid.uuid4().hex[:8]}")
    try:
        path = export.save_module(
            module, scratch, 1, serving_after, model=config.model.encoder
        )
        if ann.has_index(served_path):  # `genni serve --ann` answers from one.
            meta = export.read_asset(
                served_path, os.path.join(ann.ANN_DIR, ann.META_FILE)
            )
            ann.build(path, kind=meta.get("kind", "ivf"), log=log)
        mismatched = _check_served_items(served_path, path, serving, set(changed))
        if mismatched:
            raise ValueError(
                f"The new version ranks the served items otherwise than version "
                f"{served} for {mismatched} of the checked histories; nothing "
                "published."
            )
        decision = {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "kind": "catalog",
            "decision": "published",
            "run": run_dir,
            "judged_run": served_decision.get("judged_run", run_dir),
            "refit": bool(served_decision.get("refit")),
            "items_file": items_file,
            "served_version": served,
            "new_items": len(new),
            "changed_items": len(changed),
            "dropped_items": len(dropped),
            "unknown_attributes": unknown,
            "malformed_lines": len(catalog.malformed),
            "why": (
                f"catalog-only: {len(new):,} new items scored by their attributes, "
                f"{len(changed):,} changed; the trained part is version {served}'s "
                "and ranks its items as it does"
            ),
        }
        # What differs from the run's dataset: the next version grows from it.
        differs = {
            item: values
            for item, values in current.items()
            if not _same(values, original.get(item, []))
        }
        export.write_asset(
            path,
            CATALOG_ASSET,
            {"run": run_dir, "added": added + new, "listed": differs},
            indent=None,  # Its lists grow with the catalog.
        )
        decision.update(guard.publish(path, base, version, decision))
        guard.record_decision(base, decision)
    finally:
        atomic.remove(scratch)
    log(
        f"Version {decision['version']} of {base}: {len(new):,} new items "
        f"({unknown:,} with no attribute the model knows, served with score 0), "
        f"{len(changed):,} changed, from {run_dir} (version {served}'s run)."
    )
    return decision


def _same(a: list[str], b: list[str]) -> bool:
    return sorted(set(a)) == sorted(set(b))


def _check_served_items(
    served_path: str, path: str, serving: list[str], changed: set[str]
) -> int:
    """How many one-item histories of served items (unchanged ones, the
    first CHECK_HISTORIES) the new version at `path` answers otherwise than
    the served one, among the served unchanged items: each of them in the
    new top-K must be in the served top-K with the same score (new items
    may push served ones out of the top-K, never reorder them)."""
    askable = [item for item in serving if item not in changed][:CHECK_HISTORIES]
    if not askable:
        return 0
    histories = tf.constant([[item] for item in askable])
    k = tf.constant(min(len(serving), CHECK_K), tf.int32)
    before = guard.top_k_signature(served_path)(history=histories, k=k)
    after = guard.top_k_signature(path)(history=histories, k=k)
    keep = {item.encode() for item in serving} - {item.encode() for item in changed}
    mismatched = 0
    rows = zip(
        before[export.ITEM_IDS].numpy(),
        before[export.SCORES].numpy(),
        after[export.ITEM_IDS].numpy(),
        after[export.SCORES].numpy(),
        strict=True,
    )
    for old_ids, old_scores, new_ids, new_scores in rows:
        old = {i: s for i, s in zip(old_ids, old_scores, strict=True) if i in keep}
        last = min(old.values(), default=-np.inf)
        for item, score in zip(new_ids, new_scores, strict=True):
            if item not in keep:
                continue
            same = item in old and abs(old[item] - score) <= SCORE_TOLERANCE * (
                1.0 + abs(score)
            )
            # A tie with the served top-K's last may fall either side of it.
            tie = item not in old and score <= last + SCORE_TOLERANCE * (1 + abs(last))
            if not (same or tie):
                mismatched += 1
                break
    return mismatched


def _served_run(path: str) -> str | None:
    """The run the version at `path` serves: its catalog record's, else its
    guard decision's (a plain `genni export` records none)."""
    recorded = export.read_asset(path, CATALOG_ASSET) or guard.decision_of(path)
    return recorded.get("run")


def _some(items: list[str], most: int = 3) -> str:
    shown = ", ".join(repr(i) for i in items[:most])
    return shown + (", ..." if len(items) > most else "") if items else "none"

"""`genni replay`: how a served model would have done, period after period.

A timestamped log is replayed: at each of `--steps` cut times, `--every` days
apart, the log up to that time is the input of `genni pipeline` (its file,
`--config`), and the version it serves afterwards is scored on the **next**
period's events, as its users would have met it: every event of the period
whose user has an earlier event is a case, its history all of the user's
earlier events (raw ids, as a client sends them), its target the event.

Side by side, from the same steps:

- `warm`: the pipeline with `train: {warm_start: served}` (the nightly loop);
- `scratch`: the same pipeline, every run from scratch;
- `never`: the first step's served version, never retrained;
- `popular`: the items most often met before the cut, most first.

With `--item-attributes`, the shop's items file is the catalog at every step
and the runs know items by their attributes (`--item-tower`), so an item
with no training event is ranked too. With it or not, each loop's entry
reports `new_targets`: the cases whose target has no trained ID row in the version
it serves (no training event: never met, met only after the cut the version
was trained at, or cut by the k-core), their count, HR@10 and NDCG@10.

Output in `--output`: `replay.md` (a table per step: NDCG@10 and HR@10 of the
four, training seconds, catalog size and new-item share, published or
refused), `replay.json`, `replay.png` (NDCG@10 per step), and the pipelines'
work directories.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from genni.pipeline.loop.cases import (
    DAY,
    cut_times,
    next_period_cases,
    read_log,
    write_cut,
)
from genni.pipeline.loop.config import SERVED, train_config
from genni.pipeline.loop.pipeline import run_pipeline
from genni.pipeline.loop.report import VARIANTS, write_report
from genni.pipeline.loop.scoring import score_popular, score_version, unservable

__all__ = ["DAY", "VARIANTS", "read_log", "run_replay", "write_cut"]


def _served(workdir: str) -> str | None:
    from genni.pipeline.serving import guard

    base = os.path.join(workdir, "models")
    version = guard.served_version(base)
    return None if version is None else os.path.join(base, str(version))


def run_replay(
    log_path: str,
    every_days: float,
    steps: int,
    config: dict,
    output: str,
    log: Callable[[str], None] = print,
    serve: bool = False,
    loops: tuple[str, ...] = ("warm", "scratch"),
    item_attributes: str | None = None,
) -> list[dict]:
    """Replay `log_path` (see the module) and write its report to `output`.

    Args:
        log_path: a timestamped log (one file, any format `genni preprocess`
            reads).
        every_days: days between the cut times (and the scored period's).
        steps: how many cut times, the last one period before the log's end.
        config: the pipeline's sections (`genni.pipeline.loop.config`)
            without `input:` and `workdir:`, which each step sets.
        output: the directory of the report and the loops' work directories.
        log: where each step's progress goes.
        serve: run `genni serve` on the loop's models directory from the first
            published version on, asked all along (`serving.probe`).
        loops: which of "warm" (the nightly loop) and "scratch" run.
        item_attributes: the shop's items file (`genni preprocess
            --item-attributes`): the whole catalog at every step (a shop
            lists its items ahead of their events; nothing about which will
            be met leaks from it), and the runs know items by their
            attributes (`train: {item_tower: true}` unless the config's
            `train:` says otherwise).

    Returns:
        One row per step, as `replay.json` holds them: the cases, each
        variant's NDCG@10 and HR@10 on them, and each loop's seconds, export
        decision and served version.
    """
    from genni.components import schema
    from genni.pipeline.preprocess import outputs
    from genni.pipeline.serving.probe import ServeProbe
    from genni.pipeline.training import rundir

    if steps < 1 or every_days <= 0:
        raise ValueError("--steps must be at least 1 and --every positive.")
    lines, times, events = read_log(log_path)
    last = max(t for ts in times for t in ts)
    cuts = cut_times(last, every_days, steps)
    config = with_items_file(config, item_attributes)
    train = dict(config.get("train") or {})
    train.pop("warm_start", None)
    every_loop = {
        "warm": {**config, "train": {**train, "warm_start": SERVED}},
        "scratch": {**config, "train": train},
    }
    loops = {name: every_loop[name] for name in loops}
    candidates = train_config(every_loop["scratch"], "", {}).candidates
    rows, first = [], None
    suffix = os.path.splitext(log_path)[1]
    # Items the loop's vocabulary first holds at a step after the first, and
    # whether a served top-10 holds them from that step on.
    known: set = set()
    new_items: set = set()
    reached: set = set()
    probe = None
    trained: set = set()  # Runs met before: a step that reuses one trained 0 s.
    try:
        for step, cut in enumerate(cuts, start=1):
            step_log = os.path.join(output, "logs", f"step{step:02d}{suffix}")
            write_cut(lines, times, cut, step_log)
            histories, targets = next_period_cases(events, cut, cut + every_days * DAY)
            row: dict = {"step": step, "cut": cut, "cases": len(targets)}
            for name, loop in loops.items():
                workdir = os.path.join(output, name)
                loop = {**loop, "input": step_log, "workdir": workdir}
                start = time.perf_counter()
                result = run_pipeline(
                    loop,
                    log=lambda m, n=name: log(f"[{n}] {m}"),
                    # A run another loop trained (the first step's) is not
                    # trained again.
                    runs_from=[os.path.join(output, other) for other in loops],
                )
                row[f"{name}_seconds"] = round(time.perf_counter() - start, 1)
                # Where the runs are: another loop's, linked, are met before.
                run = os.path.realpath(result.run)
                refit = os.path.realpath(result.refit) if result.refit else None
                seconds, epochs = training_cost(run, refit, trained)
                row[f"{name}_train_seconds"] = seconds  # The refit's too.
                row[f"{name}_epochs"] = epochs
                row[f"{name}_reused"] = reused(result.run, output)
                trained.update({run, refit})
                row[f"{name}_export"] = result.export["decision"]
                row[f"{name}_why"] = result.export["why"]
                row[f"{name}_served"] = served_what(workdir)
                if name != "warm":
                    continue
                _, vocabulary = outputs.read_vocabulary(result.data)
                arrived = set(vocabulary) - known if known else set()
                new_items |= arrived
                known |= set(vocabulary)
                row["new_items"] = len(arrived)
                stats = rundir.read_json(os.path.join(result.data, schema.STATS_FILE))
                row["items"] = stats["items"]
                row["kcore"] = kcore_shares(stats)
                split = stats.get("time_split") or {}
                row["new_item_share"] = split.get("test_new_item_share")
                if serve and probe is None and _served(workdir):  # From v1 on.
                    probe = ServeProbe(
                        os.path.join(workdir, "models"),
                        os.path.join(output, "serve.log"),
                    ).start()
                    log(f"[serve] genni serve on {probe.url}, gRPC {probe.target}")
                if probe is not None:  # Users of the next period ask it.
                    probe.ask(histories)
            if first is None:  # The first step's version: never retrained.
                first = _served(os.path.join(output, next(iter(loops))))
            top10: set = set()
            for name in VARIANTS[:2]:
                if name not in loops:
                    row[name] = {}
                    continue
                served = _served(os.path.join(output, name))
                collect = top10 if name == "warm" else None
                row[name] = (
                    score_version(served, histories, targets, served=collect)
                    if targets and served
                    else {}
                )
            reached |= {item for item in top10 if item in new_items}
            row["new_items_reached"] = len(reached)
            row["never"] = (
                score_version(first, histories, targets) if targets and first else {}
            )
            row["popular"] = score_popular(events, cut, histories, targets, candidates)
            if "warm" in loops or "scratch" in loops:
                row["unservable"] = unservable(
                    _served(os.path.join(output, next(iter(loops)))),
                    events,
                    cut,
                    targets,
                )
            for name in loops:  # A served model below "most popular".
                row[f"{name}_below_popular"] = below_popular(row, name)
            if probe is not None:
                row["serve"] = probe.counts()  # So far.
            rows.append(row)
            log(f"step {step}: " + json.dumps({v: row[v] for v in VARIANTS}))
            write_report(rows, output, log_path, every_days, steps)  # After each.
    finally:
        if probe is not None:
            probe.stop()
    if probe is not None:  # The last step's swap is served a while too.
        rows[-1]["serve"] = probe.counts()
        write_report(rows, output, log_path, every_days, steps)
    return rows


def with_items_file(config: dict, item_attributes: str | None) -> dict:
    """The replay's pipeline `config` with the items file as every step's
    catalog (`preprocess: {item_attributes}`) and the item tower on, unless
    the `train:` section sets it."""
    if item_attributes is None:
        return config
    if not os.path.exists(item_attributes):
        raise FileNotFoundError(f"--item-attributes {item_attributes!r} not found.")
    preprocess = {
        **(config.get("preprocess") or {}),
        "item_attributes": item_attributes,
    }
    train = {"item_tower": True, **(config.get("train") or {})}
    return {**config, "preprocess": preprocess, "train": train}


def reused(run: str, output: str) -> str | None:
    """The loop whose finished run a loop's pipeline reused (`run` linked
    from that loop's work directory in `output`); None: its own."""
    if not os.path.islink(run):
        return None
    other = os.path.relpath(os.path.realpath(run), os.path.realpath(output))
    return other.split(os.sep)[0]


def kcore_shares(stats: dict) -> dict:
    """What the k-core of a step's dataset removed: its share of the items
    met before the validation cutoff, and of each window's targets."""
    kcore, window = stats["kcore"], stats.get("time_split") or {}
    shares = {}
    if kcore.get("items_before"):
        shares["catalog"] = round(kcore["items_removed"] / kcore["items_before"], 4)
    for split in ("valid", "test"):
        cases = window.get(f"{split}_cases")
        if cases and f"{split}_kcore_removed_targets" in window:
            shares[split] = round(window[f"{split}_kcore_removed_targets"] / cases, 4)
    return shares


def served_what(workdir: str) -> str:
    """What the loop in `workdir` serves: 'v3', 'v1 (popular)' for the
    popularity ranking (`export.export_popular`), or 'nothing'."""
    from genni.pipeline.serving import export

    path = _served(workdir)
    if path is None:
        return "nothing"
    version = os.path.basename(path)
    return f"v{version} (popular)" if export.is_popular(path) else f"v{version}"


def below_popular(row: dict, name: str) -> bool:
    """Whether the loop `name` served a model below the popularity ranking
    (its popularity fallback is that ranking, from the loop's own data)."""
    served = row[name].get("NDCG@10")
    if served is None or "(popular)" in row.get(f"{name}_served", ""):
        return False
    return served < row["popular"]["NDCG@10"]


def training_cost(run_dir: str, refit: str | None, trained: set) -> tuple:
    """What a step's training cost, from each run's metrics.json read once:
    the seconds the run and its refit trained and validated (their epochs'
    records), and in epochs `trained`, the epochs the run trained at this
    step, `chosen`, its best epoch (the one judged), and `refit`, its refit's
    epochs (None: no refit). A run an earlier step trained costs 0."""
    from genni.pipeline.training import rundir

    seconds, epochs = 0.0, {"trained": 0, "chosen": None, "refit": None}
    for path, part in ((run_dir, "trained"), (refit, "refit")):
        if path is None:
            continue
        metrics = rundir.read_json(os.path.join(path, rundir.METRICS_FILE))
        if path == run_dir:
            epochs["chosen"] = metrics.get("best_epoch")
        epochs[part] = 0 if path in trained else metrics["epochs_run"]
        if path not in trained:
            seconds += round(
                sum(
                    r["train_seconds"] + r.get("eval_seconds", 0.0)
                    for r in metrics["history"]
                ),
                1,
            )
    return seconds, epochs

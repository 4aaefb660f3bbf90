"""`genni report`: the paper's tables and figures, regenerated on your data.

Runs (or reuses) an experiment grid of `genni train` runs and writes
`REPORT_DIR/report.md` with PNG plots: the main table beside the paper, the
efficiency table (uniform vs GenNi beta 0.1 / 1 / growing), alpha, beta and k
sweeps, the BPR table for 1..K negatives, validation NDCG@10 against training
time, the self-adjusted curriculum against its initial alpha, a case study of
the negatives GenNi draws as training goes on, and each paper claim marked
reproduced or not.

Each run is keyed by its full configuration (seed included) and lives in
`RUNS_DIR/<name>-<hash>`: a run with `metrics.json` is never trained again, a
run with a checkpoint resumes, so an interrupted grid continues where it
stopped. `--quick` runs a reduced grid (few epochs, one seed) as a smoke check.
The efficiency table's speed comes from training steps of each sampler timed
side by side in one process (`REPORT_DIR/speed.json`, timed once), not from the
runs' own epoch times, which depend on what else shared the machine.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

from genni.components import schema
from genni.pipeline.training import config as configs
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig

REPORT_FILE = "report.md"
RESULTS_FILE = "results.json"
CASE_STUDY_FILE = "case_study.json"
# The case study's checkpoint and points so far, removed once it is written.
CASE_STUDY_CHECKPOINT = "case_study_checkpoint"
SPEED_FILE = "speed.json"
# Timed side by side; growing beta costs what its current beta costs.
TIMED = ("uniform", "genni beta 0.1", "genni beta 1")
METRICS = ("HR@5", "HR@10", "NDCG@5", "NDCG@10")

# Test metrics of the paper (%, full ranking), from ../shared/docs/GENNI.md.
PAPER = {
    "beauty": {
        "uniform": (3.84, 6.07, 2.49, 3.21),
        "popularity": (4.08, 6.18, 2.69, 3.37),
        "genni": (6.30, 8.79, 4.48, 5.33),
    },
    "toys": {
        "uniform": (4.68, 6.81, 3.18, 3.87),
        "genni": (7.18, 9.96, 5.15, 5.90),
    },
}
PAPER_EFFICIENCY = "Beauty, V100: SASRec 2.44 s/epoch, GenNi beta 1 6.30, beta 0.1 2.47"
PAPER_BPR = {"uniform": (2.32, 2.07), "genni": (5.64, 6.08)}  # HR@5, 1 and 8 negs.
ROW_NAMES = {
    "uniform": "SASRec (uniform)",
    "popularity": "SASRec_pop",
    "genni": "SASRec_GenNi",
    "softmax": "SASRec, full softmax (reference)",
}


# (experiment, label) pairs a grid trains first: one set, or tiers of them.
Priorities = set[tuple[str, str]] | list[set[tuple[str, str]]]

MAIN_ALPHA = 2.5  # GenNi's alpha everywhere but the alpha and BPR sweeps.
# Positions sharing one V' in the beta sweep's second series: about one
# sequence (the maximum length), against one V' per batch in the first.
BETA_GROUP = 50
# A peak of the alpha sweep must beat both ends by this fraction of NDCG@10:
# seeds of one setting differ by about 1.3% (Beauty GenNi, 3 seeds).
ALPHA_FALL = 0.02
# BPR with uniform negatives "does not gain" from more negatives while its HR@5
# with the most stays within this fraction of its HR@5 with the fewest.
BPR_GAIN = 0.02


@dataclasses.dataclass(frozen=True)
class Grid:
    """The values each experiment sweeps, and the training budget."""

    epochs: int | None
    patience: int | None
    seeds: tuple[int, ...]
    alphas: tuple[float, ...]
    betas: tuple[float, ...]
    ks: tuple[int, ...]
    bpr_ks: tuple[int, ...]
    initial_alphas: tuple[float, ...]
    beta_growth: float
    case_epochs: tuple[int, ...]
    # Betas also run with a fresh V' per BETA_GROUP positions (`--beta-group`).
    group_betas: tuple[float, ...] = ()
    case_users: int = 3
    speed_rounds: int = 5  # Side-by-side step timing of the efficiency table.
    speed_steps: int = 10
    pack: bool = False  # Train (and time) the runs still missing on packed batches.


FULL = Grid(
    epochs=None,  # TrainConfig's default (200) with patience 40.
    patience=None,
    seeds=(0, 1, 2, 3),
    alphas=(0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0),
    betas=(0.001, 0.01, 0.1, 0.3, 1.0),
    ks=(1, 3, 5, 9),
    bpr_ks=(1, 2, 3, 4, 5, 6, 7, 8),
    initial_alphas=(0.0, 1.0, 2.5, 4.0),
    beta_growth=20.0,
    case_epochs=(1, 10, 50),
    group_betas=(0.001, 0.01),
)
QUICK = Grid(
    epochs=3,
    patience=3,
    seeds=(0,),
    alphas=(0.0, 1.0, 2.5, 5.0),
    betas=(0.01, 0.1, 1.0),
    ks=(1, 3),
    bpr_ks=(1, 4),
    initial_alphas=(0.0, 2.5),
    beta_growth=1.0,
    case_epochs=(1, 3),
    group_betas=(0.01,),
    speed_rounds=2,
    speed_steps=3,
)


def experiments(grid: Grid) -> dict[str, list[tuple[str, dict]]]:
    """Experiment -> [(label, TrainConfig overrides)] (seeds added later)."""
    genni = dict(sampler="genni", alpha=MAIN_ALPHA, beta=1.0)
    return {
        "main": [
            ("uniform", dict(sampler="uniform")),
            ("popularity", dict(sampler="popularity")),
            ("genni", genni),
            # Not in the paper: the ceiling that sampled negatives approximate.
            ("softmax", dict(loss="softmax")),
        ],
        "efficiency": [
            ("uniform", dict(sampler="uniform")),
            ("genni beta 0.1", dict(genni, beta=0.1)),
            ("genni beta 1", genni),
            (
                f"genni growing beta m={grid.beta_growth:g}",
                dict(genni, beta_growth=grid.beta_growth),
            ),
        ],
        "alpha": [(f"{a:g}", dict(genni, alpha=a)) for a in grid.alphas],
        "beta": [(f"{b:g}", dict(genni, beta=b)) for b in grid.betas],
        "beta_group": [
            (f"{b:g}", dict(genni, beta=b, beta_group=BETA_GROUP))
            for b in grid.group_betas
        ],
        "k": [
            (
                f"{s} k={k}",
                dict(
                    genni if s == "genni" else {"sampler": "uniform"}, num_negatives=k
                ),
            )
            for s in ("uniform", "genni")
            for k in grid.ks
        ],
        "bpr": [
            (
                f"{s} k={k}",
                dict(
                    dict(genni, alpha=2.2) if s == "genni" else {"sampler": "uniform"},
                    loss="bpr",
                    num_negatives=k,
                ),
            )
            for s in ("uniform", "genni")
            for k in grid.bpr_ks
        ],
        "self_adjust": [
            (
                f"{kind} alpha0={a:g}",
                dict(
                    genni,
                    alpha=a,
                    alpha_step=configs.DEFAULT_ALPHA_STEP
                    if kind == "self-adjusted"
                    else None,
                ),
            )
            for kind in ("fixed", "self-adjusted")
            for a in grid.initial_alphas
        ],
    }


def data_fingerprint(data: str) -> str:
    """What identifies a dataset wherever it lives: its statistics."""
    path = os.path.join(data, schema.STATS_FILE)
    if not os.path.exists(path):
        return os.path.abspath(data)
    stats = rundir.read_json(path)
    keys = ("users", "items", "events", "max_len", "min_count", "min_rating")
    return json.dumps({k: stats.get(k) for k in keys}, sort_keys=True)


# Settings of how a run is computed, not of what: packed batches give the
# model and loss of the unpacked ones (tests/pipeline/test_packing.py), so a
# packed and an unpacked run of the same settings are the same experiment.
LAYOUT_SETTINGS = ("pack",)


# Settings added after runs were archived, left out of a run's key at their
# default, so that every run made before them keeps its key.
LATER_SETTINGS = {"beta_group": None, "candidates": "new"}

# What only a sampler reads: the full-softmax loss draws no negatives, so a
# softmax run is keyed with these at their defaults, whatever they were set to.
SAMPLER_SETTINGS = (
    "sampler",
    "num_negatives",
    "alpha",
    "beta",
    "beta_growth",
    "beta_group",
    "alpha_step",
    "gamma",
    "exclude_seen",
    "max_logits",
)


def run_key(config: TrainConfig, fingerprint: str) -> str:
    """A stable id of a run: its settings and its dataset, not their paths,
    nor its batch layout (`LAYOUT_SETTINGS`), nor, for the softmax loss, the
    settings of a sampler it does not have (`SAMPLER_SETTINGS`)."""
    if config.loss == "softmax":  # One softmax run, whatever its unused flags.
        defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
        config = dataclasses.replace(
            config, **{name: defaults[name] for name in SAMPLER_SETTINGS}
        )
    values = config.to_dict()
    for name in ("output", "data", *LAYOUT_SETTINGS):
        values.pop(name)
    for name, default in LATER_SETTINGS.items():  # Old runs keep their keys.
        if values.get(name) == default:
            values.pop(name)
    if values.get("init_from"):  # A pre-training, by its run's name, not its place.
        values["init_from"] = os.path.basename(os.path.normpath(values["init_from"]))
    values["dataset"] = fingerprint
    text = json.dumps(values, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def existing_runs(runs_dir: str) -> dict[str, tuple[str, TrainConfig]]:
    """Run key -> (directory, config) of every run already in `runs_dir`.

    Runs are found by what they are, not by their names: a run trained by
    `genni train` with the same settings on the same dataset is reused,
    packed or not. Where several share a key, a finished run wins over an
    unfinished one, then an unpacked one over a packed one.
    """
    candidates: dict[str, list[tuple[tuple, tuple[str, TrainConfig]]]] = {}
    if not os.path.isdir(runs_dir):
        return {}
    fingerprint = functools.cache(data_fingerprint)  # Runs share datasets.
    for name in sorted(os.listdir(runs_dir)):
        run_dir = os.path.join(runs_dir, name)
        path = os.path.join(run_dir, rundir.CONFIG_FILE)
        if not os.path.exists(path):
            continue
        try:
            config = TrainConfig.from_dict(rundir.read_json(path))
        except (ValueError, TypeError, json.JSONDecodeError):
            continue  # Not a run of this version; leave it alone.
        key = run_key(config, fingerprint(config.data))
        finished = os.path.exists(os.path.join(run_dir, rundir.METRICS_FILE))
        candidates.setdefault(key, []).append(
            (_rank(config, name, finished), (run_dir, config))
        )
    return _preferred(candidates)


def _rank(config: TrainConfig, name: str, finished: bool = True) -> tuple:
    """Order among runs of one key: finished first, then unpacked, then by name."""
    return (not finished, config.pack, name)


def _preferred(candidates: dict[str, list[tuple[tuple, Any]]]) -> dict[str, Any]:
    """Key -> the value of lowest `_rank` among that key's (rank, value) pairs."""
    return {key: min(found, key=lambda c: c[0])[1] for key, found in candidates.items()}


# What an archived metrics.json adds to the run's own: its dataset's
# fingerprint, so the archive is matched to a dataset wherever that lives.
ARCHIVE_DATASET = "dataset"


def archived_runs(archive: str) -> dict[str, tuple[str, dict]]:
    """Run key -> (file, metrics) of the finished runs kept in `archive`: a
    directory of runs' metrics.json files (`archive_runs`), any names. Files
    that are not a run's metrics (or of another version) are skipped; where
    several share a key, an unpacked run wins, as in `existing_runs`."""
    found: dict[str, list[tuple[tuple, tuple[str, dict]]]] = {}
    if not os.path.isdir(archive):
        return {}
    for name in sorted(os.listdir(archive)):
        path = os.path.join(archive, name)
        if not name.endswith(".json") or not os.path.isfile(path):
            continue
        try:
            metrics = rundir.read_json(path)
            config = TrainConfig.from_dict(metrics["config"])
        except (ValueError, TypeError, KeyError, json.JSONDecodeError):
            continue
        fingerprint = metrics.get(ARCHIVE_DATASET) or data_fingerprint(config.data)
        found.setdefault(run_key(config, fingerprint), []).append(
            (_rank(config, name), (path, metrics))
        )
    return _preferred(found)


def restore_runs(archive: str, runs_dir: str, data: str) -> list[str]:
    """The finished runs on `data` kept in `archive`, made runs of `runs_dir`
    again where it has not finished them (a new machine, a deleted runs dir):
    each becomes `RUNS_DIR/<name>-<key>` with its config.json and metrics.json,
    so the grid and the reproduction reuse it instead of training it again.
    No checkpoint comes back: such a run is reported, not resumed or exported.
    Returns the run directories written."""
    fingerprint = data_fingerprint(data)
    existing = existing_runs(runs_dir)
    written = []
    for key, (_, metrics) in archived_runs(archive).items():
        config = TrainConfig.from_dict(metrics["config"])
        if run_key(config, fingerprint) != key:
            continue  # Another dataset's run.
        if key in existing:
            output = existing[key][0]
            if os.path.exists(os.path.join(output, rundir.METRICS_FILE)):
                continue
        else:
            output = os.path.join(
                runs_dir, f"{_slug(config.to_dict(), config.seed)}-{key}"
            )
        settings = dataclasses.replace(config, data=data, output=output).to_dict()
        os.makedirs(output, exist_ok=True)
        if not os.path.exists(os.path.join(output, rundir.CONFIG_FILE)):
            rundir.write_json(os.path.join(output, rundir.CONFIG_FILE), settings)
        restored = {k: v for k, v in metrics.items() if k != ARCHIVE_DATASET}
        rundir.write_json(
            os.path.join(output, rundir.METRICS_FILE), dict(restored, config=settings)
        )
        written.append(output)
    return written


def archive_runs(
    results: dict[str, dict],
    archive: str,
    prefix: str,
    kept: dict[str, tuple[str, dict]] | None = None,
) -> list[str]:
    """Copy the finished runs' metrics.json (run dir -> metrics) that `archive`
    does not hold yet into it, as `<prefix>_<run dir name>.json` with their
    dataset's fingerprint: a directory small enough to commit, from which
    `restore_runs` brings the runs back on another machine. `kept`: what
    `archived_runs(archive)` returned, updated here with what is written (so
    a caller archiving after every run reads the archive once). Returns the
    files written."""
    if kept is None:
        kept = archived_runs(archive)
    written = []
    fingerprint_of = functools.cache(data_fingerprint)  # Runs share datasets.
    for run_dir, metrics in sorted(results.items()):
        config = TrainConfig.from_dict(metrics["config"])
        fingerprint = fingerprint_of(config.data)
        key = run_key(config, fingerprint)
        if key in kept:
            continue
        os.makedirs(archive, exist_ok=True)
        name = os.path.basename(os.path.normpath(run_dir))
        name = f"{name if name.startswith(prefix + '_') else f'{prefix}_{name}'}.json"
        path = os.path.join(archive, name)
        rundir.write_json(path, dict(metrics, **{ARCHIVE_DATASET: fingerprint}))
        kept[key] = (path, metrics)
        written.append(path)
    return written


def _slug(values: dict, seed: int) -> str:
    """A readable name for a run directory (the hash makes it unique)."""
    if values.get("loss") == "softmax":  # No negatives: the sampler is unused.
        return f"softmax_s{seed}"
    parts = [str(values.get("sampler", "genni"))]
    if values.get("init_from"):  # Fine-tuned from a pre-training (S3-Rec).
        parts.insert(0, "pretrained")
    if parts[0] == "genni":
        parts.append(f"a{values.get('alpha', 2.5):g}")
        if values.get("beta_growth") is not None:
            parts.append(f"m{values['beta_growth']:g}")
        else:
            parts.append(f"b{values.get('beta', 1.0):g}")
        if values.get("beta_group") is not None:
            parts.append(f"g{values['beta_group']}")
        if values.get("alpha_step") is not None:
            parts.append("sa")
    parts.append(f"k{values.get('num_negatives', 1)}")
    if values.get("loss", "bce") != "bce":
        parts.append(values["loss"])
    parts.append(f"s{seed}")
    return "_".join(parts)


def plan(data: str, runs_dir: str, grid: Grid) -> dict[str, dict]:
    """Every distinct run of the grid: run dir -> {config, uses}."""
    runs: dict[str, dict] = {}
    fingerprint = data_fingerprint(data)
    existing = existing_runs(runs_dir)
    budget = {}
    if grid.epochs is not None:
        budget["epochs"] = grid.epochs
    if grid.patience is not None:
        budget["patience"] = grid.patience
    if grid.pack:
        budget["pack"] = True
    for experiment, rows in experiments(grid).items():
        for order, (label, overrides) in enumerate(rows):
            for seed in grid.seeds:
                values = {k: v for k, v in overrides.items() if v is not None}
                config = TrainConfig(
                    data=data, output="", seed=seed, **budget, **values
                )
                key = run_key(config, fingerprint)
                if key in existing:
                    output, config = existing[key]
                else:
                    output = os.path.join(runs_dir, f"{_slug(values, seed)}-{key}")
                entry = runs.setdefault(
                    output,
                    {"config": dataclasses.replace(config, output=output), "uses": []},
                )
                entry["uses"].append((experiment, label, seed, order))
    return runs


def claim_runs(grid: Grid, table: dict | None = None) -> set[tuple[str, str]]:
    """(experiment, label) of the runs that decide the paper's claims: the
    ones `claims` needs, trained before the rest of the grid.

    With `table` (`collect` of the finished runs) it adds the run that can
    still move an undecided alpha claim (`_alpha_next`), and drops GenNi's BPR
    runs once uniform BPR gains from more negatives (the BPR claim is then a
    no whatever GenNi does).
    """
    labels = {e: [label for label, _ in rows] for e, rows in experiments(grid).items()}
    alphas = labels["alpha"]
    between = f"{MAIN_ALPHA:g}" if f"{MAIN_ALPHA:g}" in alphas[1:-1] else alphas[1]
    fewest, most = grid.bpr_ks[0], grid.bpr_ks[-1]
    decided = table is not None and _bpr_uniform_gains(_bpr_uniform(table))
    bpr = ("uniform",) if decided else ("uniform", "genni")
    return {
        *(_alpha_next(table) if table is not None else ()),
        ("main", "uniform"),
        ("main", "genni"),
        ("efficiency", "genni beta 0.1"),
        ("efficiency", "genni beta 1"),
        *(("alpha", a) for a in (alphas[0], between, alphas[-1])),
        ("k", "genni k=1"),
        ("k", f"uniform k={grid.ks[-1]}"),
        *(("bpr", f"{s} k={k}") for s in bpr for k in (fewest, most)),
    }


def sketch_runs(grid: Grid) -> list[set[tuple[str, str]]]:
    """After the claims, the runs that give each figure still without a shape
    its first points, one set per figure, the emptiest figure first: the
    self-adjusted curriculum from the lowest and from the main initial alpha
    (the fixed ones are the alpha sweep's), the lowest beta, GenNi with the
    most negatives beside uniform with a few, BPR with the middle k. The rest
    of the grid then fills the figures in."""
    self_adjusted = {grid.initial_alphas[0], MAIN_ALPHA} & set(grid.initial_alphas)
    middle = grid.bpr_ks[len(grid.bpr_ks) // 2]
    return [
        {("self_adjust", f"self-adjusted alpha0={a:g}") for a in self_adjusted},
        {("beta", f"{grid.betas[0]:g}")}
        | {("beta_group", f"{b:g}") for b in grid.group_betas[:1]},
        {
            ("k", f"genni k={grid.ks[-1]}"),
            ("k", f"uniform k={grid.ks[len(grid.ks) // 2]}"),
        },
        {("bpr", f"{s} k={middle}") for s in ("uniform", "genni")},
    ]


def priorities(grid: Grid, table: dict | None = None) -> list[set[tuple[str, str]]]:
    """The order a grid trains in, as tiers of (experiment, label): the runs
    that decide the claims (`claim_runs`), then `sketch_runs`."""
    return [claim_runs(grid, table), *sketch_runs(grid)]


def _alpha_next(table: dict) -> set[tuple[str, str]]:
    """While the alpha claim waits (`_alpha_peak`: no alpha between the ends
    beats both by ALPHA_FALL yet), the missing alpha nearest the best one so
    far (the higher on a tie): the one most likely to decide it. Nothing once
    the claim can be judged, or while an end is missing."""
    labels = list(table.get("alpha", {}))
    try:
        state = _alpha_state(table)
    except NotRun:
        return set()
    judged, values, peak, missing = state
    if peak or not missing:
        return set()
    best = labels.index(judged[max(range(len(values)), key=values.__getitem__)])
    nearest = min(
        missing, key=lambda a: (abs(labels.index(a) - best), -labels.index(a))
    )
    return {("alpha", nearest)}


def run_grid(
    runs: dict[str, dict],
    verbose: int = 1,
    train_missing: bool = True,
    first: Priorities | Callable[[dict[str, dict]], Priorities] = frozenset(),
    after_each: Callable[[dict[str, dict]], None] | None = None,
) -> dict[str, dict]:
    """metrics.json of every finished run, after training those without it
    unless `train_missing` is False. A started run (one killed midway)
    resumes before any new one begins. Runs used by an (experiment, label)
    in `first` train before the others; `first` is one set or a list of sets
    (tiers, the first tier first), or a function of the finished runs'
    metrics that gives one, asked again before each run. `after_each` gets
    the finished runs' metrics after each run trained.

    Several grids (processes) can share `runs`: a run that another one is
    training is skipped (`rundir.claim`), and one finished meanwhile is not
    trained again, so each process takes the next free run."""
    from genni.pipeline.training import train

    def finished(run_dir: str) -> bool:
        return os.path.exists(os.path.join(run_dir, train.METRICS_FILE))

    def started(run_dir: str) -> bool:
        return os.path.exists(os.path.join(run_dir, train.CONFIG_FILE))

    def results() -> dict[str, dict]:
        return {
            d: rundir.read_json(os.path.join(d, train.METRICS_FILE))
            for d in runs
            if finished(d)
        }

    todo = [d for d in runs if not finished(d)] if train_missing else []
    total = len(todo)
    if verbose and train_missing:
        print(
            f"{len(runs)} runs in the grid, {len(runs) - total} finished, "
            f"{total} to train."
        )
    done = results()  # Read again only when a run finishes.
    for position in range(1, total + 1):
        run_dir = next((d for d in todo if started(d)), None)
        if run_dir is None:
            now = first(done) if callable(first) else first
            tiers = now if isinstance(now, list) else [now]
            run_dir = next(  # The grid's order otherwise.
                (
                    d
                    for tier in tiers
                    for d in todo
                    if any(use[:2] in tier for use in runs[d]["uses"])
                ),
                todo[0],
            )
        todo.remove(run_dir)
        if finished(run_dir):  # Another process (a second grid, a person) did it.
            if verbose:
                print(
                    f"[{position}/{total}] finished meanwhile: "
                    f"{os.path.basename(run_dir)}",
                    flush=True,
                )
            done = results()
            continue
        resume = started(run_dir)
        if verbose:
            verb = "resuming" if resume else "training"
            print(
                f"[{position}/{total}] {verb} {os.path.basename(run_dir)}",
                flush=True,
            )
        try:
            train.train(runs[run_dir]["config"], resume=resume, verbose=0)
        except rundir.RunBusyError as e:  # A second grid (or a person) has it.
            if verbose:
                print(f"[{position}/{total}] skipped: {e}", flush=True)
            continue
        done = results()
        if after_each is not None:
            after_each(done)
    return done


def case_study(config: TrainConfig, grid: Grid, output: str, verbose: int = 0) -> dict:
    """The negatives GenNi would draw for a few users as training goes on.

    Trains a GenNi model (the grid's main configuration, seed 0) epoch by
    epoch; at each of `grid.case_epochs` it takes the first users of the
    validation split and lists the items with the highest probability under
    GenNi's Q(i | h_t) = softmax(alpha * h_t . e_i) over items but the target
    (and the user's earlier items when the run excludes them, `exclude_seen`),
    with their scores, beside the target's own score and rank.
    """
    import tensorflow as tf

    from genni.pipeline.training import data, train

    path = os.path.join(output, CASE_STUDY_FILE)
    if os.path.exists(path):
        return rundir.read_json(path)
    info = schema.DatasetInfo.load(config.data)
    tf.keras.utils.set_random_seed(config.seed)
    model = train.build_model(config, info, None)
    # A run directory of its own, checkpointed every epoch: a killed report
    # picks the case study up again (with the same settings only).
    checkpoint_dir = os.path.join(output, CASE_STUDY_CHECKPOINT)
    state = rundir.prepare(
        checkpoint_dir, config.to_dict(), True, {"epoch": 0, "points": []}
    )
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=model.optimizer),
        checkpoint_dir,
        max_to_keep=2,  # The state file may still name the one before the last.
    )
    if state["epoch"]:
        manager.checkpoint.restore(
            state["checkpoint"]
        ).assert_existing_objects_matched()
    # Raw ids, as in the logs: line n of each file is id n (0 is padding).
    items, users = (
        ["", *_lines(os.path.join(config.data, name))]
        for name in (schema.ITEMS_FILE, schema.USERS_FILE)
    )
    valid = next(
        iter(
            data.batches(
                data.records(config.data, schema.VALID),
                info.max_len,
                schema.VALID,
                grid.case_users,
            )
        )
    )
    cached = data.records(config.data, schema.TRAIN).cache()
    points = state["points"]
    epochs = max(grid.case_epochs)
    if verbose:
        resumed = f", resumed at epoch {state['epoch']}" if state["epoch"] else ""
        print(f"Case study: training GenNi for {epochs} epochs{resumed}, {path}")
    progress = tf.keras.utils.Progbar(epochs, verbose=verbose, unit_name="epoch")
    if state["epoch"]:
        progress.update(state["epoch"])
    for epoch in range(state["epoch"], epochs):
        model.fit(
            data.train_dataset(
                cached,
                info.max_len,
                config.batch_size,
                config.seed,
                epoch,
                pack=config.pack,
            ),
            epochs=1,
            verbose=0,
        )
        progress.update(epoch + 1)
        if epoch + 1 in grid.case_epochs:
            points.append(
                {
                    "epoch": epoch + 1,
                    "users": _case_users(model, valid, items, users, config),
                }
            )
        state = {"epoch": epoch + 1, "points": points, "checkpoint": manager.save()}
        rundir.write_json(os.path.join(checkpoint_dir, rundir.STATE_FILE), state)
    result = {
        "alpha": config.alpha,
        "exclude_seen": config.exclude_seen,
        "points": points,
    }
    rundir.write_json(path, result)
    shutil.rmtree(checkpoint_dir)
    return result


def _lines(path: str) -> list[str]:
    with open(path) as f:
        return [line.rstrip("\n") for line in f]


def _case_users(
    model, valid: dict, items: list[str], users: list[str], config: TrainConfig
) -> list:
    """GenNi's top negatives for each of the `valid` users, with the target."""
    import numpy as np

    scores = model(valid[schema.INPUT_IDS]).numpy()  # (U, V + 1)
    found = []
    for row, target in enumerate(valid[schema.TARGET].numpy()):
        s = scores[row].astype(np.float64)
        logits = config.alpha * s
        logits[0] = -np.inf
        if config.exclude_seen:  # As the sampler: never the user's own items.
            logits[valid[schema.HISTORY][row].numpy()] = -np.inf
        logits[target] = -np.inf
        q = np.exp(logits - logits[np.isfinite(logits)].max())
        q /= q.sum()
        top = np.argsort(-q)[:5]
        found.append(
            {
                "user": users[valid[schema.USER_ID].numpy()[row]],
                "target": items[target],
                "target_score": float(s[target]),
                "target_rank": int((s[1:] > s[target]).sum()) + 1,
                "negatives": [
                    {
                        "item": items[i],
                        "score": float(s[i]),
                        "probability": float(q[i]),
                    }
                    for i in top
                ],
            }
        )
    return found


# ----------------------------------------------------------------- rendering


def measure_speed(data: str, grid: Grid, output: str) -> dict:
    """Step time of the efficiency table's samplers, side by side in one process.

    The runs' own epoch times depend on what else shared the machine; these do
    not (their ratios at least). Written to `REPORT_DIR/speed.json`.
    """
    from genni.pipeline.reproduce import speed

    configs = dict(experiments(grid)["efficiency"])
    times = speed.step_times(
        data,
        {label: dict(configs[label], pack=grid.pack) for label in TIMED},
        grid.speed_rounds,
        grid.speed_steps,
        verbose=False,
    )
    info = schema.DatasetInfo.load(data)
    batch_size = TrainConfig(data=data, output="").batch_size
    result = {
        "ms_per_step": {
            label: 1000 * statistics.median(t) for label, t in times.items()
        },
        "steps_per_epoch": math.ceil((info.num_train_examples or 0) / batch_size),
        "batch_size": batch_size,
        "rounds": grid.speed_rounds,
        "steps": grid.speed_steps,
        "cpus": os.cpu_count(),
    }
    os.makedirs(output, exist_ok=True)
    rundir.write_json(os.path.join(output, SPEED_FILE), result)
    return result


def _seconds_per_epoch(speed: dict, label: str) -> float:
    return speed["ms_per_step"][label] * speed["steps_per_epoch"] / 1000


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _fmt(values: list[float]) -> str:
    mean, std = _mean_std(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ± {std:.2f}"


def collect(runs: dict[str, dict], results: dict[str, dict]) -> dict:
    """experiment -> label (in the grid's order) -> metrics.json per finished seed.

    A label whose runs have not finished maps to an empty list.
    """
    found: dict[str, dict[str, tuple[int, list[dict]]]] = {}
    for run_dir, entry in runs.items():
        for experiment, label, _seed, order in entry["uses"]:
            rows = found.setdefault(experiment, {})
            done = rows.setdefault(label, (order, []))[1]
            if run_dir in results:
                done.append(results[run_dir])
    return {
        experiment: {
            label: metrics
            for label, (_, metrics) in sorted(rows.items(), key=lambda r: r[1][0])
        }
        for experiment, rows in found.items()
    }


class NotRun(Exception):
    """A section or claim whose runs have not all finished."""


def _finished(table: dict, experiment: str) -> tuple[dict[str, list[dict]], list[str]]:
    """The rows of an experiment that have finished, and the labels still missing."""
    rows = table.get(experiment, {})
    done = {label: metrics for label, metrics in rows.items() if metrics}
    missing = [label for label in rows if label not in done]
    if not done:
        raise NotRun(f"missing: {', '.join(missing) or experiment}")
    return done, missing


def _rows(table: dict, experiment: str) -> dict[str, list[dict]]:
    """All rows of an experiment, or NotRun naming those not finished."""
    done, missing = _finished(table, experiment)
    if missing:
        raise NotRun(f"missing: {', '.join(missing)}")
    return done


def _still_missing(missing: list[str]) -> list[str]:
    return ["", f"Not run yet: {', '.join(missing)}."] if missing else []


def _test(metrics: list[dict], name: str) -> list[float]:
    return [m["test"][name] for m in metrics]


def _hr_ndcg(metrics: list[dict]) -> tuple[str, str]:
    return _fmt(_test(metrics, "HR@10")), _fmt(_test(metrics, "NDCG@10"))


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _plot(path: str, title: str, xlabel: str, series: dict, logx: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4), dpi=90)
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test %" if "valid" not in title else "valid NDCG@10 %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _sweep_series(
    rows: dict[str, list[dict]], xs: list[float], labels: list[str]
) -> dict:
    return {
        name: (xs, [_mean_std(_test(rows[label], name))[0] for label in labels])
        for name in ("HR@10", "NDCG@10")
    }


CLAIMS = (
    "GenNi beats uniform by a wide margin (>= 30% NDCG@10)",
    "Quality rises with alpha, then falls",
    "Beta 0.1 keeps about 95% of beta 1 quality (HR@5 >= 90%)",
    "GenNi with 1 negative beats uniform with the most negatives",
    "BPR: uniform does not gain from more negatives, GenNi does",
)


def claims(table: dict) -> list[tuple[str, bool | None, str]]:
    """Each claim: (claim, reproduced or None when not run, the numbers)."""
    out = []
    for claim, check in zip(CLAIMS, _CHECKS, strict=True):
        try:
            reproduced, numbers = check(table)
        except NotRun as e:
            reproduced, numbers = None, str(e)
        out.append((claim, reproduced, numbers))
    return out


def _mean(table: dict, experiment: str, label: str, name: str = "NDCG@10") -> float:
    metrics = table.get(experiment, {}).get(label)
    if not metrics:
        raise NotRun(f"missing: {label}")
    return _mean_std(_test(metrics, name))[0]


def _wide_margin(table: dict) -> tuple[bool, str]:
    u, g = _mean(table, "main", "uniform"), _mean(table, "main", "genni")
    return g >= 1.3 * u, f"NDCG@10 {g:.2f} vs {u:.2f} ({g / u:.2f}x)"


def _alpha_state(table: dict) -> tuple[list[str], list[float], bool, list[str]]:
    """The finished alphas, their NDCG@10, whether one between the ends beats
    both by ALPHA_FALL, and the alphas not run yet. NotRun until both ends and
    one alpha between them have finished."""
    labels = list(table.get("alpha", {}))
    done, missing = _finished(table, "alpha")
    _need(table, "alpha", [labels[0], labels[-1]])
    if not any(label in done for label in labels[1:-1]):
        raise NotRun(f"missing: one of {', '.join(labels[1:-1])}")
    judged = [label for label in labels if label in done]
    values = [_mean(table, "alpha", a) for a in judged]
    best = max(range(len(values)), key=values.__getitem__)
    ends = max(values[0], values[-1])
    peak = 0 < best < len(values) - 1 and values[best] >= (1 + ALPHA_FALL) * ends
    return judged, values, peak, missing


def _alpha_peak(table: dict) -> tuple[bool, str]:
    """Judged on the finished alphas once both ends and one between have run:
    an alpha between the ends that beats both by ALPHA_FALL is a yes; without
    one it is a no only once every alpha has run (one not run yet could still
    be that peak)."""
    judged, values, peak, missing = _alpha_state(table)
    pairs = ", ".join(f"{a}: {v:.2f}" for a, v in zip(judged, values, strict=True))
    if not peak and missing:
        raise NotRun(
            f"NDCG@10 by alpha so far: {pairs}; no alpha between the ends beats "
            f"both by {ALPHA_FALL:.0%} yet, so the claim waits for: "
            f"{', '.join(missing)}"
        )
    not_run = f" (not run yet: {', '.join(missing)})" if missing else ""
    return peak, (
        f"NDCG@10 by alpha: {pairs}{not_run}; a peak must beat both ends by "
        f"{ALPHA_FALL:.0%}"
    )


def _beta_cost(table: dict) -> tuple[bool, str]:
    b01 = _mean(table, "efficiency", "genni beta 0.1", "HR@5")
    b1 = _mean(table, "efficiency", "genni beta 1", "HR@5")
    return b01 >= 0.9 * b1, f"HR@5 {b01:.2f} vs {b1:.2f} ({100 * b01 / b1:.0f}%)"


def _ends(table: dict, experiment: str, sampler: str) -> tuple[str, str]:
    """The fewest and the most negatives of a sweep: all its claim needs."""
    labels = [label for label in table.get(experiment, {}) if label.startswith(sampler)]
    if not labels:
        raise NotRun(f"missing: {experiment}")
    return labels[0], labels[-1]


def _need(table: dict, experiment: str, labels: list[str]) -> None:
    """NotRun naming every run among `labels` that has not finished."""
    missing = [b for b in labels if not table.get(experiment, {}).get(b)]
    if missing:
        raise NotRun(f"missing: {', '.join(missing)}")


def _one_beats_many(table: dict) -> tuple[bool, str]:
    most = _ends(table, "k", "uniform")[1]
    _need(table, "k", ["genni k=1", most])
    g1, umax = _mean(table, "k", "genni k=1"), _mean(table, "k", most)
    return g1 > umax, f"NDCG@10 GenNi k=1 {g1:.2f} vs {most} {umax:.2f}"


def _bpr_uniform(table: dict) -> tuple[float, float] | None:
    """HR@5 of uniform BPR with the fewest and the most negatives, or None
    while either has not run."""
    try:
        ends = _ends(table, "bpr", "uniform")
        _need(table, "bpr", list(ends))
    except NotRun:
        return None
    first, last = (_mean(table, "bpr", b, "HR@5") for b in ends)
    return first, last


def _bpr_uniform_gains(hr5: tuple[float, float] | None) -> bool:
    """Whether uniform BPR gains from more negatives (`_bpr_uniform`'s HR@5
    up by more than BPR_GAIN): then the BPR claim fails whatever GenNi does."""
    return hr5 is not None and hr5[1] > hr5[0] * (1 + BPR_GAIN)


def _bpr_negatives(table: dict) -> tuple[bool, str]:
    """Judged once both ends of both samplers have run, or as a no as soon as
    uniform's two ends show a gain (the claim says uniform does not gain)."""
    uniform, genni = _ends(table, "bpr", "uniform"), _ends(table, "bpr", "genni")
    hr5 = _bpr_uniform(table)
    gains = _bpr_uniform_gains(hr5)
    if not gains:
        _need(table, "bpr", [*uniform, *genni])
    u_first, u_last = hr5
    numbers = f"HR@5 uniform {u_first:.2f} -> {u_last:.2f}"
    missing = [b for b in genni if not table["bpr"].get(b)]
    if missing:
        return False, (
            f"{numbers}: uniform gains, so the claim fails whatever GenNi does "
            f"(not run yet: {', '.join(missing)})"
        )
    g_first, g_last = (_mean(table, "bpr", b, "HR@5") for b in genni)
    return (
        not gains and g_last > g_first,
        f"{numbers}, GenNi {g_first:.2f} -> {g_last:.2f}",
    )


_CHECKS = (_wide_margin, _alpha_peak, _beta_cost, _one_beats_many, _bpr_negatives)


def _main_section(table: dict, paper: dict, output: str) -> list[str]:
    lines = [_row("model", *METRICS), "|---|" + "---|" * len(METRICS)]
    for label, metrics in table.get("main", {}).items():
        if metrics:
            lines.append(
                _row(ROW_NAMES[label], *(_fmt(_test(metrics, m)) for m in METRICS))
            )
        else:
            lines.append(_row(ROW_NAMES[label], *(["not run yet"] * len(METRICS))))
        if label in paper:
            lines.append(
                _row(f"{ROW_NAMES[label]} (paper)", *(f"{v:.2f}" for v in paper[label]))
            )
    for label, values in paper.items():
        note = inconsistent_row_note(
            ROW_NAMES[label], dict(zip(METRICS, values, strict=True))
        )
        if note:
            lines += ["", note]
    if "softmax" in table.get("main", {}):
        lines += [
            "",
            f"{ROW_NAMES['softmax']} is not in the paper: SASRec trained with "
            "cross-entropy over every item (`genni train --loss softmax`), no "
            "sampled negatives; the ceiling that sampled negatives approximate.",
        ]
    return lines


def inconsistent_row_note(name: str, metrics: dict[str, float]) -> str | None:
    """A line saying that a paper row's HR@5/10 and NDCG@5/10 cannot come from
    one set of rankings (`genni.components.metrics.metrics_consistent`), or None."""
    from genni.components.metrics import metrics_consistent

    ok, why = metrics_consistent(metrics)
    if ok:
        return None
    return (
        f"The paper's {name} row cannot come from one set of rankings: {why} "
        "(`benchmarks/paper_consistency.py`)."
    )


def _efficiency_section(
    table: dict, paper: dict, output: str, speed: dict | None = None
) -> list[str]:
    """Side-by-side step times (when timed) and each finished run's quality."""
    rows = table.get("efficiency", {})
    try:
        done, _ = _finished(table, "efficiency")
    except NotRun:
        if not speed:  # Nothing to show.
            raise
        done = {}
    beta1 = done.get("genni beta 1") and _mean(
        table, "efficiency", "genni beta 1", "HR@5"
    )
    lines = [f"Paper: {PAPER_EFFICIENCY}.", ""]
    if speed:
        lines += [
            f"Speed: training steps (batch {speed['batch_size']}) of each sampler "
            f"timed side by side in one process, median of {speed['rounds']} "
            f"interleaved rounds of {speed['steps']} steps on {speed['cpus']} CPUs; "
            f"s / epoch = ms / step x {speed['steps_per_epoch']} steps. Growing "
            "beta costs what its current beta costs.",
            "",
        ]
    else:
        lines += [f"Speed: not timed ({SPEED_FILE} missing).", ""]
    lines += [
        _row(
            "sampler",
            "ms / step",
            "s / epoch",
            "x uniform",
            "HR@5",
            "NDCG@5",
            "HR@5 vs beta 1",
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for label in rows:
        cost = ("-", "-", "-")
        if speed and label in speed["ms_per_step"]:
            ms = speed["ms_per_step"]
            cost = (
                f"{ms[label]:.0f}",
                f"{_seconds_per_epoch(speed, label):.1f}",
                f"{ms[label] / ms['uniform']:.2f}",
            )
        if label in done:
            hr5 = _mean_std(_test(done[label], "HR@5"))[0]
            quality = (
                _fmt(_test(done[label], "HR@5")),
                _fmt(_test(done[label], "NDCG@5")),
                f"{100 * hr5 / beta1:.0f}%" if beta1 else "-",
            )
        else:
            quality = ("not run yet",) * 3
        lines.append(_row(label, *cost, *quality))
    return lines


def beta_note(table: dict) -> str:
    """How V' is drawn in the two series of the beta figure, with beta x |V|
    of the report's own dataset at its smallest beta."""
    items = None
    for metrics in (m for runs in table.get("beta", {}).values() for m in runs):
        path = os.path.join(metrics["config"]["data"], schema.STATS_FILE)
        if os.path.exists(path):
            items = rundir.read_json(path).get("items")
            break
    betas = [float(label) for label in table.get("beta", {})]
    few = "beta x |V|"
    if items and betas:
        few += f": about {min(betas) * items:.0f} at beta {min(betas):g}"
    return (
        "V' (the beta fraction of items GenNi scores) is drawn once per batch and "
        "shared by all its positions in the first series, so at the smallest "
        f"betas every negative of a batch comes from the same few items ({few}). "
        f"The second series draws a fresh V' for every {BETA_GROUP} positions "
        f"(`genni train --beta-group {BETA_GROUP}`, about one per sequence); the "
        "paper allows either. At beta 1 V' holds every item, so both series "
        "meet there."
    )


def _beta_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, missing = _finished(table, "beta")
    fresh_title = f"NDCG@10, V' per {BETA_GROUP} positions"
    grouped = table.get("beta_group", {})
    done = {label: metrics for label, metrics in grouped.items() if metrics}
    labels = list(rows)
    xs = [float(label) for label in labels]
    series = {
        f"{name}, V' per batch": points
        for name, points in _sweep_series(rows, xs, labels).items()
    }
    if done:
        # At beta 1 V' is every item: the same run whichever way it is drawn.
        fresh = [(float(b), _mean(table, "beta_group", b)) for b in done]
        if "1" in rows and "1" not in done:
            fresh.append((1.0, _mean(table, "beta", "1")))
        series[fresh_title] = (
            [x for x, _ in fresh],
            [y for _, y in fresh],
        )
    _plot(os.path.join(output, "beta.png"), "Performance vs beta", "beta", series, True)
    lines = [beta_note(table), "", "![beta](beta.png)", ""]
    lines += [_row("beta", "HR@10", "NDCG@10", fresh_title), "|---|---|---|---|"]
    for label in dict.fromkeys([*table.get("beta", {}), *grouped]):
        cells = _hr_ndcg(rows[label]) if label in rows else ("-", "-")
        fresh_cell = (
            _fmt(_test(done[label], "NDCG@10"))
            if label in done
            else ("not run yet" if label in grouped else "-")
        )
        lines.append(_row(label, *cells, fresh_cell))
    missing += [
        f"{label} (V' per {BETA_GROUP})" for label in grouped if label not in done
    ]
    return lines + _still_missing(missing)


def _sweep_section(
    experiment: str,
    title: str,
    xlabel: str,
    logx: bool,
):
    def section(table: dict, paper: dict, output: str) -> list[str]:
        rows, missing = _finished(table, experiment)
        labels = list(rows)
        xs = [float(label) for label in labels]
        series = _sweep_series(rows, xs, labels)
        _plot(os.path.join(output, f"{experiment}.png"), title, xlabel, series, logx)
        lines = [f"![{experiment}]({experiment}.png)", ""]
        lines += [_row(xlabel, "HR@10", "NDCG@10"), "|---|---|---|"]
        lines += [_row(label, *_hr_ndcg(rows[label])) for label in labels]
        return lines + _still_missing(missing)

    return section


def _k_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, missing = _finished(table, "k")
    series = {}
    for sampler in ("uniform", "genni"):
        labels = [label for label in rows if label.startswith(sampler)]
        ks = [int(label.split("=")[1]) for label in labels]
        series[sampler] = (ks, [_mean(table, "k", label) for label in labels])
    _plot(
        os.path.join(output, "k.png"), "NDCG@10 vs number of negatives k", "k", series
    )
    lines = ["![k](k.png)", "", _row("sampler, k", "HR@10", "NDCG@10"), "|---|---|---|"]
    lines += [_row(label, *_hr_ndcg(rows[label])) for label in rows]
    return lines + _still_missing(missing)


def _bpr_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, _ = _finished(table, "bpr")
    ks = sorted({int(label.split("=")[1]) for label in table["bpr"]})
    lines = [
        "Paper (Beauty): uniform {} -> {}, GenNi (alpha 2.2) {} -> {} from 1 to 8 "
        "negatives.".format(*PAPER_BPR["uniform"], *PAPER_BPR["genni"]),
        "",
        _row("sampler", *(f"k={k}" for k in ks)),
        "|---|" + "---|" * len(ks),
    ]
    for sampler in ("uniform", "genni"):
        cells = (
            _fmt(_test(rows[f"{sampler} k={k}"], "HR@5"))
            if f"{sampler} k={k}" in rows
            else "not run yet"
            for k in ks
        )
        lines.append(_row(sampler, *cells))
    return lines


def _time_section(
    table: dict, paper: dict, output: str, speed: dict | None = None
) -> list[str]:
    eff, _ = _finished(table, "efficiency")
    series = {}
    for label in TIMED:
        if label not in eff:
            continue
        clock, xs, ys = 0.0, [], []
        for record in eff[label][0]["history"]:
            clock += (
                _seconds_per_epoch(speed, label) if speed else record["train_seconds"]
            )
            if "valid" in record:
                xs.append(clock)
                ys.append(record["valid"]["NDCG@10"])
        series[label] = (xs, ys)
    _plot(
        os.path.join(output, "valid_vs_time.png"),
        "valid NDCG@10 vs training time (first seed)",
        "training seconds" + (" (epochs x side-by-side s / epoch)" if speed else ""),
        series,
    )
    how = (
        "Training time is each epoch's side-by-side time (efficiency table) "
        "times the epochs run, so the runs' shared-machine slowdowns do not "
        "distort it."
        if speed
        else "Training time is the runs' own, measured while they shared the machine."
    )
    return ["![valid vs time](valid_vs_time.png)", "", how]


def _self_adjust_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, missing = _finished(table, "self_adjust")
    initial = sorted({float(label.split("=")[1]) for label in table["self_adjust"]})
    kinds = ("fixed", "self-adjusted")
    series = {}
    for kind in kinds:
        done = [a for a in initial if f"{kind} alpha0={a:g}" in rows]
        series[kind] = (
            done,
            [_mean(table, "self_adjust", f"{kind} alpha0={a:g}") for a in done],
        )
    _plot(
        os.path.join(output, "self_adjust.png"),
        "NDCG@10 vs initial alpha",
        "initial alpha",
        series,
    )
    lines = [
        "![self-adjust](self_adjust.png)",
        "",
        _row(
            "initial alpha",
            "fixed NDCG@10",
            "self-adjusted NDCG@10",
            "alpha at the best epoch (self-adjusted, first seed)",
        ),
        "|---|---|---|---|",
    ]
    for a in initial:
        cells = [
            _fmt(_test(rows[label], "NDCG@10")) if label in rows else "not run yet"
            for label in (f"{kind} alpha0={a:g}" for kind in kinds)
        ]
        alpha = "-"
        adjusted = rows.get(f"self-adjusted alpha0={a:g}")
        if adjusted:
            at_best = [
                r.get("alpha")
                for r in adjusted[0]["history"]
                if r["epoch"] == adjusted[0]["best_epoch"]
            ]
            if at_best and at_best[0] is not None:
                alpha = f"{at_best[0]:.2f}"
        lines.append(_row(f"{a:g}", *cells, alpha))
    return lines + _still_missing(missing)


def _case_lines(case: dict) -> list[str]:
    lines = [
        "Items with the highest probability under Q(i | h_t) = "
        f"softmax({case['alpha']:g} * h_t . e_i) for the first validation users: "
        "the items GenNi draws as negatives, all but the target"
        + (
            " and the user's earlier items (`--exclude-seen`)."
            if case.get("exclude_seen")
            else " (the user's earlier items included, as in training; "
            "evaluation masks them)."
        ),
        "",
    ]
    for point in case["points"]:
        lines += [f"**Epoch {point['epoch']}**", ""]
        lines += [
            _row("user", "target (score, rank)", "top negatives: item (score, Q)")
        ]
        lines.append("|---|---|---|")
        for user in point["users"]:
            negs = ", ".join(
                f"{n['item']} ({n['score']:.2f}, {n['probability']:.3f})"
                for n in user["negatives"]
            )
            target = (
                f"{user['target']} ({user['target_score']:.2f}, {user['target_rank']})"
            )
            lines.append(_row(user["user"], target, negs))
        lines.append("")
    return lines


SECTIONS = (
    ("Main table", _main_section),
    ("Efficiency", _efficiency_section),
    (
        "Performance vs alpha",
        _sweep_section("alpha", "Performance vs alpha", "alpha", False),
    ),
    (
        "Performance vs beta",
        _beta_section,
    ),
    ("Number of negatives k", _k_section),
    ("BPR loss with 1..K negatives (HR@5)", _bpr_section),
    ("Validation NDCG@10 vs training time", _time_section),
    ("Self-adjusted curriculum vs initial alpha", _self_adjust_section),
)
USE_SPEED = (_efficiency_section, _time_section)


def render(
    output: str,
    runs: dict[str, dict],
    results: dict[str, dict],
    case: dict | None,
    dataset: str | None,
    commands: list[str],
    speed: dict | None = None,
) -> str:
    """Write report.md and the plots into `output`; returns the Markdown.

    `speed`: the side-by-side step times of `measure_speed` (None: not timed).

    Sections whose runs have not all finished say so (and claims resting on
    them are "not run"), so a report renders at any point of the grid.
    """
    os.makedirs(output, exist_ok=True)
    table = collect(runs, results)
    paper = PAPER.get(dataset or "", {})
    seeds = sorted({use[2] for e in runs.values() for use in e["uses"]})
    epochs = max((r["config"]["epochs"] for r in results.values()), default=0)
    lines = [f"# GenNi reproduction report{f' ({dataset})' if dataset else ''}", ""]
    lines += ["Commands:", "", "```bash", *commands, "```", ""]
    lines += [
        f"{len(results)} of {len(runs)} runs finished, seeds {seeds}, at most "
        f"{epochs} epochs each; test metrics (%, full ranking) at the best "
        "validation NDCG@10, mean ± std over seeds.",
        "",
    ]
    packed = sorted(os.path.basename(d) for d in results if runs[d]["config"].pack)
    if packed:
        lines += [
            f"{len(packed)} of the finished runs trained on packed batches "
            "(`genni train --pack`: the same model and loss as unpacked ones, "
            "other random draws): " + ", ".join(packed) + ".",
            "",
        ]
    for title, section in SECTIONS:
        lines += [f"## {title}", ""]
        timed = {"speed": speed} if section in USE_SPEED else {}
        try:
            lines += section(table, paper, output, **timed)
        except NotRun as e:
            lines.append(f"Not run yet ({e}).")
        lines.append("")
    lines += [
        "## Case study: GenNi's most likely negatives as training goes on",
        "",
    ]
    if case:
        lines += _case_lines(case)
    else:
        lines += [
            "Not run yet: it trains after the grid "
            "(`genni report` without `--report-only`).",
            "",
        ]
    verdicts = claims(table)
    lines += [
        "## The paper's claims",
        "",
        "| claim | reproduced | numbers |",
        "|---|---|---|",
    ]
    marks = {True: "yes", False: "no", None: "not run"}
    lines += [_row(c, marks[ok], why) for c, ok, why in verdicts]
    lines.append("")
    text = "\n".join(lines)
    with open(os.path.join(output, REPORT_FILE), "w") as f:
        f.write(text)
    summary = {
        "runs": {
            os.path.basename(d): {
                "uses": e["uses"],
                "test": results[d]["test"] if d in results else None,
                "best_epoch": results[d]["best_epoch"] if d in results else None,
                "packed": e["config"].pack,
            }
            for d, e in runs.items()
        },
        "claims": [
            {"claim": c, "reproduced": ok, "numbers": why} for c, ok, why in verdicts
        ],
    }
    rundir.write_json(os.path.join(output, RESULTS_FILE), summary)
    return text


def report(
    data: str,
    output: str,
    runs_dir: str | None,
    quick: bool,
    seeds: int | None,
    dataset: str | None,
    verbose: int = 1,
    commands: list[str] | None = None,
    report_only: bool = False,
    pack: bool = False,
    archive: str | None = None,
) -> str:
    """Plan the grid, train what is missing (unless `report_only`), render.

    `pack`: train the runs still missing on packed batches (`genni train
    --pack`). Finished runs are reused packed or not (`run_key`), and the
    report names the packed ones.

    `archive`: a directory of finished runs' metrics.json: those on `data`
    come back into `runs_dir` first (`restore_runs`), and each run that
    finishes is added to it (`archive_runs`), so results outlive the machine.
    """
    grid = QUICK if quick else FULL
    grid = dataclasses.replace(grid, pack=pack)
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"--seeds must be at least 1. Got {seeds}.")
        grid = dataclasses.replace(grid, seeds=tuple(range(seeds)))
    schema.DatasetInfo.load(data)  # A clear error before any training.
    os.makedirs(output, exist_ok=True)
    runs_dir = runs_dir or os.path.join(output, "runs")
    prefix = dataset or os.path.basename(os.path.normpath(data))
    if archive is not None:
        restored = restore_runs(archive, runs_dir, data)
        if verbose and restored:
            print(f"{len(restored)} finished runs restored from {archive}.")
        kept = archived_runs(archive)
    runs = plan(data, runs_dir, grid)
    start = time.perf_counter()
    speed_path = os.path.join(output, SPEED_FILE)
    if os.path.exists(speed_path):  # Timed once per report directory.
        speed = rundir.read_json(speed_path)
    else:
        speed = measure_speed(data, grid, output)
    case_path = os.path.join(output, CASE_STUDY_FILE)
    case = rundir.read_json(case_path) if os.path.exists(case_path) else None

    def rerender(results: dict[str, dict]) -> None:  # A report at every run's end.
        if archive is not None:
            archive_runs(results, archive, prefix, kept)
        render(output, runs, results, case, dataset, commands or [], speed)

    results = run_grid(
        runs,
        verbose=verbose,
        train_missing=not report_only,
        first=lambda done: priorities(grid, collect(runs, done)),
        after_each=rerender,
    )
    main_genni = next(
        e["config"]
        for e in runs.values()
        if any(use[:3] == ("main", "genni", grid.seeds[0]) for use in e["uses"])
    )
    if grid.case_epochs and not report_only:
        case = case_study(
            dataclasses.replace(main_genni, output=""), grid, output, verbose
        )
    if archive is not None:
        archive_runs(results, archive, prefix, kept)
    text = render(output, runs, results, case, dataset, commands or [], speed)
    if verbose:
        print(
            f"Report: {os.path.join(output, REPORT_FILE)} "
            f"({time.perf_counter() - start:.0f} s)"
        )
    return text

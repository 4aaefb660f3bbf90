"""What a run is and what it is called: its key, its name, and finding it.

A run is keyed by its full configuration (seed included) and its dataset's
statistics, not by paths (`run_key`), so a run made anywhere under any name is
found again by its settings (`existing_runs`). Names are for people: a
pipeline's or a report grid's run is `<slug>-<key>` (`run_name`); the
research tooling's own names are in `research/run_names.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from typing import Any

from genni.components import schema
from genni.components.samplers import budget, registry
from genni.components.samplers.config import SamplerConfig
from genni.models.config import FIRST_ENCODER
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig

# Settings of how a run is computed, not of what (`setting(layout=True)`):
# packed batches give the model and loss of the unpacked ones
# (tests/components/test_packing.py), so a packed and an unpacked run of the
# same settings are the same experiment.
LAYOUT_SETTINGS = tuple(f.key for f in TrainConfig.fields() if f.meta.get("layout"))

# The settings of the first archived runs: a run's key holds each of them
# whatever its value. Any setting added since is in a key only when it is
# not at its default, so that every run made before it keeps its key; a new
# setting needs no entry anywhere. This list never grows.
KEYED_AT_DEFAULT = frozenset(
    {
        "sampler",
        "num_negatives",
        "alpha",
        "beta",
        "beta_growth",
        "alpha_step",
        "gamma",
        "exclude_seen",
        "max_logits",
        "loss",
        "epochs",
        "patience",
        "eval_every",
        "batch_size",
        "learning_rate",
        "hidden_size",
        "num_layers",
        "num_heads",
        "dropout",
        "attention_dropout",
        "seed",
        "init_from",
    }
)

# What only a sampler reads (`SamplerConfig`'s settings): the full-softmax
# loss draws no negatives, so a softmax run is keyed with these at their
# defaults, whatever they were set to.
SAMPLER_SETTINGS = SamplerConfig.keys()

# The statistics that identify a dataset (`data_fingerprint`).
FINGERPRINT_STATS = ("users", "items", "events", "max_len", "min_count", "min_rating")


def data_fingerprint(data: str) -> str:
    """What identifies a dataset wherever it lives: its statistics."""
    path = os.path.join(data, schema.STATS_FILE)
    if not os.path.exists(path):
        return os.path.abspath(data)
    stats = rundir.read_json(path)
    values = {k: stats.get(k) for k in FINGERPRINT_STATS}
    split = stats.get("time_split")
    if split:  # (Absent under leave-one-out: earlier fingerprints stay.)
        values["time_split"] = [split["valid_cutoff"], split["test_cutoff"]]
    if stats.get("hold_out"):  # Items held out (`--hold-out-items`).
        values["hold_out"] = [stats["hold_out"]["share"], stats["hold_out"]["seed"]]
    return json.dumps(values, sort_keys=True)


def run_key(config: TrainConfig, fingerprint: str) -> str:
    """A stable id of a run: its settings and its dataset, not their paths,
    nor its batch layout (`LAYOUT_SETTINGS`), nor, for the softmax loss, the
    settings of a sampler it does not have (`SAMPLER_SETTINGS`), nor those of
    another encoder (`ModelConfig.unread`), nor the log Q
    correction of a loss other than the sampled softmax, nor a cap on
    GenNi's candidates (`max_candidates`) at or above the catalog's size: a
    run is keyed by the candidates it scores, whether a cap or a
    `draw_budget` set them."""
    if config.loss == "softmax":  # One softmax run, whatever its unused flags.
        config = dataclasses.replace(config, sampler=SamplerConfig())
    if config.loss != "sampled_softmax" and not config.logq_correction:
        config = config.replace(logq_correction=True)  # Unread.
    unread = config.model.unread()  # Another encoder's settings.
    if unread:
        defaults = type(config.model)()
        config = dataclasses.replace(
            config,
            model=config.model.replace(**{n: getattr(defaults, n) for n in unread}),
        )
    stats = _stats(fingerprint)
    items = stats.get("items")
    sampler = config.sampler
    if sampler.draw_budget is not None and _has(stats, "events", "users", "max_len"):
        positions = budget.positions_per_step(
            stats["events"], stats["users"], stats["max_len"], config.batch_size
        )
        sampler = sampler.replace(
            max_candidates=sampler.draw_candidates(items, positions),
            draw_budget=None,
        )
    if sampler.max_candidates is not None and items and items <= sampler.max_candidates:
        # A cap above the catalog never bites: the uncapped run's experiment.
        sampler = sampler.replace(max_candidates=None)
    values = dataclasses.replace(config, sampler=sampler).to_dict()
    for name in ("output", "data", *LAYOUT_SETTINGS):
        values.pop(name)
    defaults = TrainConfig.defaults()
    for name in list(values):  # Old runs keep their keys.
        if name not in KEYED_AT_DEFAULT and values[name] == defaults.get(name):
            values.pop(name)
    for name in ("init_from", "warm_start"):  # A run by its name, not its place.
        if values.get(name):
            values[name] = os.path.basename(os.path.normpath(values[name]))
    values["dataset"] = fingerprint
    text = json.dumps(values, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _stats(fingerprint: str) -> dict:
    """The statistics in a `data_fingerprint` (none for a dataset without
    statistics, fingerprinted by its path)."""
    try:
        stats = json.loads(fingerprint)
    except json.JSONDecodeError:
        return {}
    return stats if isinstance(stats, dict) else {}


def _has(stats: dict, *names: str) -> bool:
    return all(stats.get(name) for name in names)


def slug(values: dict, seed: int) -> str:
    """A readable name for a run's settings (the key makes it unique),
    led by its encoder unless that is the first one (earlier names stay)."""
    encoder = values.get("encoder", FIRST_ENCODER)
    lead = "" if encoder == FIRST_ENCODER else f"{encoder}_"
    if values.get("loss") == "softmax":  # No negatives: the sampler is unused.
        return f"{lead}softmax_s{seed}"
    sampler = str(values.get("sampler", "genni"))
    parts = [sampler]
    # A fine-tuned run (S3-Rec) is named by its pre-training, not its draw.
    generated = sampler in registry.model_generated()
    if values.get("init_from"):
        parts.insert(0, "pretrained")
        generated = False
    if generated:
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
    return lead + "_".join(parts)


def run_name(values: dict, seed: int, key: str) -> str:
    """The directory name of a report grid's run (or of a restored run)."""
    return f"{slug(values, seed)}-{key}"


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
            (rank(config, name, finished), (run_dir, config))
        )
    return preferred(candidates)


def rank(config: TrainConfig, name: str, finished: bool = True) -> tuple:
    """Order among runs of one key: finished first, then unpacked, then by name."""
    return (not finished, config.pack, name)


def preferred(candidates: dict[str, list[tuple[tuple, Any]]]) -> dict[str, Any]:
    """Key -> the value of lowest `rank` among that key's (rank, value) pairs."""
    return {key: min(found, key=lambda c: c[0])[1] for key, found in candidates.items()}

"""The experiment grid behind the paper's tables and figures, and its runs.

`experiments` lists each table's and figure's rows as `TrainConfig`
overrides; `plan` turns them into run directories, one per distinct run
(keyed by `keys.run_key`), reusing runs that already exist under any name.
"""

from __future__ import annotations

import dataclasses
import os

from genni.pipeline.training import config as configs
from genni.pipeline.training import keys
from genni.pipeline.training.config import TrainConfig
from research import paper

MAIN_ALPHA = 2.5  # GenNi's alpha everywhere but the alpha and BPR sweeps.
# Positions sharing one V' in the beta sweep's second series: about one
# sequence (the maximum length), against one V' per batch in the first.
BETA_GROUP = 50


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


def _without_stopping(settings: dict) -> dict:
    """A preset's settings less its early stopping: every row of a grid runs
    on the grid's budget (epochs, patience), so that rows compare."""
    return {k: v for k, v in settings.items() if k not in configs.STOPPING_SETTINGS}


def experiments(grid: Grid) -> dict[str, list[tuple[str, dict]]]:
    """Experiment -> [(label, TrainConfig overrides)] (seeds added later)."""
    genni = dict(sampler="genni", alpha=MAIN_ALPHA, beta=1.0)
    return {
        "main": [
            ("uniform", dict(sampler="uniform")),
            ("popularity", dict(sampler="popularity")),
            ("genni", genni),
            # Not in the paper: the ceiling that sampled negatives approximate,
            # and `genni train`'s default (GenNi under the sampled softmax).
            ("softmax", dict(loss="softmax")),
            ("recommended", _without_stopping(configs.preset(configs.DEFAULT_PRESET))),
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
                    dict(genni, alpha=paper.BPR_ALPHA)
                    if s == "genni"
                    else {"sampler": "uniform"},
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


def labels(grid: Grid) -> dict[str, list[str]]:
    """Experiment -> its labels, in the grid's order."""
    return {e: [label for label, _ in rows] for e, rows in experiments(grid).items()}


def plan(data: str, runs_dir: str, grid: Grid) -> dict[str, dict]:
    """Every distinct run of the grid: run dir -> {config, uses}."""
    runs: dict[str, dict] = {}
    fingerprint = keys.data_fingerprint(data)
    existing = keys.existing_runs(runs_dir)
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
                config = TrainConfig.of(
                    data=data, output="", seed=seed, **budget, **values
                )
                key = keys.run_key(config, fingerprint)
                if key in existing:
                    output, config = existing[key]
                else:
                    output = os.path.join(runs_dir, keys.run_name(values, seed, key))
                entry = runs.setdefault(
                    output,
                    {"config": dataclasses.replace(config, output=output), "uses": []},
                )
                entry["uses"].append((experiment, label, seed, order))
    return runs

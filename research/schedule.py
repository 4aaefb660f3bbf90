"""The order a grid trains in, and training it.

First the runs that decide the paper's claims (`claims.claim_runs`), then the
first points of each figure still without a shape (`sketch_runs`), then the
rest of the grid in its order (`run_grid`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from genni.pipeline.training import rundir
from research.claims import claim_runs
from research.grid import MAIN_ALPHA, Grid

# (experiment, label) pairs a grid trains first: one set, or tiers of them.
Priorities = set[tuple[str, str]] | list[set[tuple[str, str]]]


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
        run_dir = next((d for d in todo if rundir.started(d)), None)
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
        resume = rundir.started(run_dir)
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

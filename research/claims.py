"""The paper's claims, as data: each one's text, the runs it needs, its check.

A `Claim` keeps together what must not drift apart: the sentence the report
prints, the (experiment, label) runs that decide it (trained before the rest
of the grid, `claim_runs`), and the judge that reads those runs' metrics.
A judge returns (reproduced, the numbers) or raises `table.NotRun` naming the
runs it still waits for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from research import grid as grids
from research.table import NotRun, ends, finished, mean, need

Runs = set[tuple[str, str]]  # (experiment, label) pairs.

# A peak of the alpha sweep must beat both ends by this fraction of NDCG@10:
# seeds of one setting differ by about 1.3% (Beauty GenNi, 3 seeds).
ALPHA_FALL = 0.02
# BPR with uniform negatives "does not gain" from more negatives while its HR@5
# with the most stays within this fraction of its HR@5 with the fewest.
BPR_GAIN = 0.02


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim of the paper: `needs(grid, table)` the runs that decide it
    (`table`: the finished runs, or None before any), `judge(table)` the
    verdict and its numbers."""

    text: str
    needs: Callable[[grids.Grid, dict | None], Runs]
    judge: Callable[[dict], tuple[bool, str]]


# ---------------------------------------------------------- wide margin


def _margin_needs(grid: grids.Grid, table: dict | None) -> Runs:
    return {("main", "uniform"), ("main", "genni")}


def _wide_margin(table: dict) -> tuple[bool, str]:
    u, g = mean(table, "main", "uniform"), mean(table, "main", "genni")
    return g >= 1.3 * u, f"NDCG@10 {g:.2f} vs {u:.2f} ({g / u:.2f}x)"


# ---------------------------------------------------------- alpha peak


def alpha_state(table: dict) -> tuple[list[str], list[float], bool, list[str]]:
    """The finished alphas, their NDCG@10, whether one between the ends beats
    both by ALPHA_FALL, and the alphas not run yet. NotRun until both ends and
    one alpha between them have finished."""
    labels = list(table.get("alpha", {}))
    done, missing = finished(table, "alpha")
    need(table, "alpha", [labels[0], labels[-1]])
    if not any(label in done for label in labels[1:-1]):
        raise NotRun(f"missing: one of {', '.join(labels[1:-1])}")
    judged = [label for label in labels if label in done]
    values = [mean(table, "alpha", a) for a in judged]
    best = max(range(len(values)), key=values.__getitem__)
    top = max(values[0], values[-1])
    peak = 0 < best < len(values) - 1 and values[best] >= (1 + ALPHA_FALL) * top
    return judged, values, peak, missing


def alpha_next(table: dict) -> Runs:
    """While the alpha claim waits (no alpha between the ends beats both by
    ALPHA_FALL yet), the missing alpha nearest the best one so far (the
    higher on a tie): the one most likely to decide it. Nothing once the
    claim can be judged, or while an end is missing."""
    labels = list(table.get("alpha", {}))
    try:
        judged, values, peak, missing = alpha_state(table)
    except NotRun:
        return set()
    if peak or not missing:
        return set()
    best = labels.index(judged[max(range(len(values)), key=values.__getitem__)])
    nearest = min(
        missing, key=lambda a: (abs(labels.index(a) - best), -labels.index(a))
    )
    return {("alpha", nearest)}


def _alpha_needs(grid: grids.Grid, table: dict | None) -> Runs:
    """Both ends, the main alpha between them (or the second), and the alpha
    that can still decide the claim (`alpha_next`)."""
    alphas = grids.labels(grid)["alpha"]
    main = f"{grids.MAIN_ALPHA:g}"
    between = main if main in alphas[1:-1] else alphas[1]
    found = {("alpha", a) for a in (alphas[0], between, alphas[-1])}
    return found | (alpha_next(table) if table is not None else set())


def _alpha_peak(table: dict) -> tuple[bool, str]:
    """Judged on the finished alphas once both ends and one between have run:
    an alpha between the ends that beats both by ALPHA_FALL is a yes; without
    one it is a no only once every alpha has run (one not run yet could still
    be that peak)."""
    judged, values, peak, missing = alpha_state(table)
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


# ---------------------------------------------------------- beta cost


def _beta_needs(grid: grids.Grid, table: dict | None) -> Runs:
    return {("efficiency", "genni beta 0.1"), ("efficiency", "genni beta 1")}


def _beta_cost(table: dict) -> tuple[bool, str]:
    b01 = mean(table, "efficiency", "genni beta 0.1", "HR@5")
    b1 = mean(table, "efficiency", "genni beta 1", "HR@5")
    return b01 >= 0.9 * b1, f"HR@5 {b01:.2f} vs {b1:.2f} ({100 * b01 / b1:.0f}%)"


# ---------------------------------------------------------- one vs many


def _one_needs(grid: grids.Grid, table: dict | None) -> Runs:
    return {("k", "genni k=1"), ("k", f"uniform k={grid.ks[-1]}")}


def _one_beats_many(table: dict) -> tuple[bool, str]:
    most = ends(table, "k", "uniform")[1]
    need(table, "k", ["genni k=1", most])
    g1, umax = mean(table, "k", "genni k=1"), mean(table, "k", most)
    return g1 > umax, f"NDCG@10 GenNi k=1 {g1:.2f} vs {most} {umax:.2f}"


# ---------------------------------------------------------- BPR negatives


def bpr_uniform(table: dict) -> tuple[float, float] | None:
    """HR@5 of uniform BPR with the fewest and the most negatives, or None
    while either has not run."""
    try:
        both = ends(table, "bpr", "uniform")
        need(table, "bpr", list(both))
    except NotRun:
        return None
    first, last = (mean(table, "bpr", b, "HR@5") for b in both)
    return first, last


def bpr_uniform_gains(hr5: tuple[float, float] | None) -> bool:
    """Whether uniform BPR gains from more negatives (`bpr_uniform`'s HR@5
    up by more than BPR_GAIN): then the BPR claim fails whatever GenNi does."""
    return hr5 is not None and hr5[1] > hr5[0] * (1 + BPR_GAIN)


def _bpr_needs(grid: grids.Grid, table: dict | None) -> Runs:
    """Both ends of both samplers; GenNi's no longer once uniform gains (the
    claim is then a no whatever GenNi does)."""
    fewest, most = grid.bpr_ks[0], grid.bpr_ks[-1]
    decided = table is not None and bpr_uniform_gains(bpr_uniform(table))
    samplers = ("uniform",) if decided else ("uniform", "genni")
    return {("bpr", f"{s} k={k}") for s in samplers for k in (fewest, most)}


def _bpr_negatives(table: dict) -> tuple[bool, str]:
    """Judged once both ends of both samplers have run, or as a no as soon as
    uniform's two ends show a gain (the claim says uniform does not gain)."""
    uniform, genni = ends(table, "bpr", "uniform"), ends(table, "bpr", "genni")
    hr5 = bpr_uniform(table)
    gains = bpr_uniform_gains(hr5)
    if not gains:
        need(table, "bpr", [*uniform, *genni])
    u_first, u_last = hr5
    numbers = f"HR@5 uniform {u_first:.2f} -> {u_last:.2f}"
    missing = [b for b in genni if not table["bpr"].get(b)]
    if missing:
        return False, (
            f"{numbers}: uniform gains, so the claim fails whatever GenNi does "
            f"(not run yet: {', '.join(missing)})"
        )
    g_first, g_last = (mean(table, "bpr", b, "HR@5") for b in genni)
    return (
        not gains and g_last > g_first,
        f"{numbers}, GenNi {g_first:.2f} -> {g_last:.2f}",
    )


CLAIMS = (
    Claim(
        "GenNi beats uniform by a wide margin (>= 30% NDCG@10)",
        _margin_needs,
        _wide_margin,
    ),
    Claim("Quality rises with alpha, then falls", _alpha_needs, _alpha_peak),
    Claim(
        "Beta 0.1 keeps about 95% of beta 1 quality (HR@5 >= 90%)",
        _beta_needs,
        _beta_cost,
    ),
    Claim(
        "GenNi with 1 negative beats uniform with the most negatives",
        _one_needs,
        _one_beats_many,
    ),
    Claim(
        "BPR: uniform does not gain from more negatives, GenNi does",
        _bpr_needs,
        _bpr_negatives,
    ),
)


def verdicts(table: dict) -> list[tuple[str, bool | None, str]]:
    """Each claim: (claim, reproduced or None when not run, the numbers)."""
    out = []
    for claim in CLAIMS:
        try:
            reproduced, numbers = claim.judge(table)
        except NotRun as e:
            reproduced, numbers = None, str(e)
        out.append((claim.text, reproduced, numbers))
    return out


def claim_runs(grid: grids.Grid, table: dict | None = None) -> Runs:
    """(experiment, label) of the runs that decide the paper's claims, trained
    before the rest of the grid: what each claim `needs`. With `table` (the
    finished runs) that can change: the alpha that can still decide an
    undecided alpha claim joins, GenNi's BPR runs leave once uniform BPR gains.
    """
    return set().union(*(claim.needs(grid, table) for claim in CLAIMS))

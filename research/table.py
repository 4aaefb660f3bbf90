"""The finished runs by experiment and label (`collect`), and reading them.

A table is experiment -> label -> the metrics.json of each finished seed; the
claims and the report's sections read it, and raise `NotRun` naming the runs
they still need.
"""

from __future__ import annotations

import statistics


class NotRun(Exception):
    """A section or claim whose runs have not all finished."""


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


def finished(table: dict, experiment: str) -> tuple[dict[str, list[dict]], list[str]]:
    """The rows of an experiment that have finished, and the labels still missing."""
    rows = table.get(experiment, {})
    done = {label: metrics for label, metrics in rows.items() if metrics}
    missing = [label for label in rows if label not in done]
    if not done:
        raise NotRun(f"missing: {', '.join(missing) or experiment}")
    return done, missing


def need(table: dict, experiment: str, labels: list[str]) -> None:
    """NotRun naming every run among `labels` that has not finished."""
    missing = [b for b in labels if not table.get(experiment, {}).get(b)]
    if missing:
        raise NotRun(f"missing: {', '.join(missing)}")


def ends(table: dict, experiment: str, sampler: str) -> tuple[str, str]:
    """The fewest and the most negatives of a sweep: all its claim needs."""
    labels = [label for label in table.get(experiment, {}) if label.startswith(sampler)]
    if not labels:
        raise NotRun(f"missing: {experiment}")
    return labels[0], labels[-1]


def test(metrics: list[dict], name: str) -> list[float]:
    """A test metric of each seed."""
    return [m["test"][name] for m in metrics]


def mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def fmt(values: list[float]) -> str:
    """'mean ± std' over seeds (the mean alone for one seed)."""
    mean, std = mean_std(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ± {std:.2f}"


def mean(table: dict, experiment: str, label: str, name: str = "NDCG@10") -> float:
    """A label's test metric, mean over its seeds; NotRun while none finished."""
    metrics = table.get(experiment, {}).get(label)
    if not metrics:
        raise NotRun(f"missing: {label}")
    return mean_std(test(metrics, name))[0]

"""The report's sections: each table and figure, from the finished runs.

A section takes the table of finished runs (`table.collect`), the paper's
rows for the dataset and the report directory (where it writes its plot),
and returns Markdown lines, or raises `table.NotRun` when none of its runs
has finished; rows whose runs have not finished say so.
"""

from __future__ import annotations

import os

from genni.components import schema
from genni.pipeline.training import rundir
from research.grid import BETA_GROUP
from research.paper import BPR, METRICS, efficiency_line
from research.speed import SPEED_FILE, TIMED, seconds_per_epoch
from research.table import NotRun, finished, fmt, mean, mean_std, test

ROW_NAMES = {
    "uniform": "SASRec (uniform)",
    "popularity": "SASRec_pop",
    "genni": "SASRec_GenNi",
    "softmax": "SASRec, full softmax (reference)",
    "recommended": "SASRec_GenNi, recommended preset",
}


def _still_missing(missing: list[str]) -> list[str]:
    return ["", f"Not run yet: {', '.join(missing)}."] if missing else []


def _hr_ndcg(metrics: list[dict]) -> tuple[str, str]:
    return fmt(test(metrics, "HR@10")), fmt(test(metrics, "NDCG@10"))


def table_row(*cells: object) -> str:
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
        name: (xs, [mean_std(test(rows[label], name))[0] for label in labels])
        for name in ("HR@10", "NDCG@10")
    }


def _main_section(table: dict, paper: dict, output: str) -> list[str]:
    lines = [table_row("model", *METRICS), "|---|" + "---|" * len(METRICS)]
    for label, metrics in table.get("main", {}).items():
        if metrics:
            lines.append(
                table_row(ROW_NAMES[label], *(fmt(test(metrics, m)) for m in METRICS))
            )
        else:
            lines.append(table_row(ROW_NAMES[label], *(["not run yet"] * len(METRICS))))
        if label in paper:
            row = paper[label]
            lines.append(
                table_row(
                    f"{ROW_NAMES[label]} (paper)", *(f"{row[m]:.2f}" for m in METRICS)
                )
            )
    for label, values in paper.items():
        note = inconsistent_row_note(ROW_NAMES[label], values)
        if note:
            lines += ["", note]
    if "softmax" in table.get("main", {}):
        lines += [
            "",
            f"{ROW_NAMES['softmax']} is not in the paper: SASRec trained with "
            "cross-entropy over every item (`genni train --loss softmax`), no "
            "sampled negatives; the ceiling that sampled negatives approximate.",
        ]
    if "recommended" in table.get("main", {}):
        lines += [
            "",
            f"{ROW_NAMES['recommended']} is not in the paper: `genni train`'s "
            "default, GenNi's 64 negatives (alpha 1) under a sampled softmax "
            "with the log Q correction (`--preset recommended`); "
            f"{ROW_NAMES['genni']} is `--preset paper`.",
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
        done, _ = finished(table, "efficiency")
    except NotRun:
        if not speed:  # Nothing to show.
            raise
        done = {}
    beta1 = done.get("genni beta 1") and mean(
        table, "efficiency", "genni beta 1", "HR@5"
    )
    lines = [f"Paper: {efficiency_line()}.", ""]
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
        table_row(
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
                f"{seconds_per_epoch(speed, label):.1f}",
                f"{ms[label] / ms['uniform']:.2f}",
            )
        if label in done:
            hr5 = mean_std(test(done[label], "HR@5"))[0]
            quality = (
                fmt(test(done[label], "HR@5")),
                fmt(test(done[label], "NDCG@5")),
                f"{100 * hr5 / beta1:.0f}%" if beta1 else "-",
            )
        else:
            quality = ("not run yet",) * 3
        lines.append(table_row(label, *cost, *quality))
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
    rows, missing = finished(table, "beta")
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
        fresh = [(float(b), mean(table, "beta_group", b)) for b in done]
        if "1" in rows and "1" not in done:
            fresh.append((1.0, mean(table, "beta", "1")))
        series[fresh_title] = (
            [x for x, _ in fresh],
            [y for _, y in fresh],
        )
    _plot(os.path.join(output, "beta.png"), "Performance vs beta", "beta", series, True)
    lines = [beta_note(table), "", "![beta](beta.png)", ""]
    lines += [table_row("beta", "HR@10", "NDCG@10", fresh_title), "|---|---|---|---|"]
    for label in dict.fromkeys([*table.get("beta", {}), *grouped]):
        cells = _hr_ndcg(rows[label]) if label in rows else ("-", "-")
        fresh_cell = (
            fmt(test(done[label], "NDCG@10"))
            if label in done
            else ("not run yet" if label in grouped else "-")
        )
        lines.append(table_row(label, *cells, fresh_cell))
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
        rows, missing = finished(table, experiment)
        labels = list(rows)
        xs = [float(label) for label in labels]
        series = _sweep_series(rows, xs, labels)
        _plot(os.path.join(output, f"{experiment}.png"), title, xlabel, series, logx)
        lines = [f"![{experiment}]({experiment}.png)", ""]
        lines += [table_row(xlabel, "HR@10", "NDCG@10"), "|---|---|---|"]
        lines += [table_row(label, *_hr_ndcg(rows[label])) for label in labels]
        return lines + _still_missing(missing)

    return section


def _k_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, missing = finished(table, "k")
    series = {}
    for sampler in ("uniform", "genni"):
        labels = [label for label in rows if label.startswith(sampler)]
        ks = [int(label.split("=")[1]) for label in labels]
        series[sampler] = (ks, [mean(table, "k", label) for label in labels])
    _plot(
        os.path.join(output, "k.png"), "NDCG@10 vs number of negatives k", "k", series
    )
    lines = [
        "![k](k.png)",
        "",
        table_row("sampler, k", "HR@10", "NDCG@10"),
        "|---|---|---|",
    ]
    lines += [table_row(label, *_hr_ndcg(rows[label])) for label in rows]
    return lines + _still_missing(missing)


def _bpr_section(table: dict, paper: dict, output: str) -> list[str]:
    rows, _ = finished(table, "bpr")
    ks = sorted({int(label.split("=")[1]) for label in table["bpr"]})
    lines = [
        "Paper (Beauty): uniform {} -> {}, GenNi (alpha 2.2) {} -> {} from 1 to 8 "
        "negatives.".format(*BPR["uniform"], *BPR["genni"]),
        "",
        table_row("sampler", *(f"k={k}" for k in ks)),
        "|---|" + "---|" * len(ks),
    ]
    for sampler in ("uniform", "genni"):
        cells = (
            fmt(test(rows[f"{sampler} k={k}"], "HR@5"))
            if f"{sampler} k={k}" in rows
            else "not run yet"
            for k in ks
        )
        lines.append(table_row(sampler, *cells))
    return lines


def _time_section(
    table: dict, paper: dict, output: str, speed: dict | None = None
) -> list[str]:
    eff, _ = finished(table, "efficiency")
    series = {}
    for label in TIMED:
        if label not in eff:
            continue
        clock, xs, ys = 0.0, [], []
        run = eff[label][0]
        for record in run.get("history", []):
            # A run restored from an archive keeps no per-epoch times: its median.
            own = record.get("train_seconds", run.get("seconds_per_epoch"))
            clock += seconds_per_epoch(speed, label) if speed else own
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
    rows, missing = finished(table, "self_adjust")
    initial = sorted({float(label.split("=")[1]) for label in table["self_adjust"]})
    kinds = ("fixed", "self-adjusted")
    series = {}
    for kind in kinds:
        done = [a for a in initial if f"{kind} alpha0={a:g}" in rows]
        series[kind] = (
            done,
            [mean(table, "self_adjust", f"{kind} alpha0={a:g}") for a in done],
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
        table_row(
            "initial alpha",
            "fixed NDCG@10",
            "self-adjusted NDCG@10",
            "alpha at the best epoch (self-adjusted, first seed)",
        ),
        "|---|---|---|---|",
    ]
    for a in initial:
        cells = [
            fmt(test(rows[label], "NDCG@10")) if label in rows else "not run yet"
            for label in (f"{kind} alpha0={a:g}" for kind in kinds)
        ]
        alpha = "-"
        adjusted = rows.get(f"self-adjusted alpha0={a:g}")
        if adjusted:
            at_best = [
                r.get("alpha")
                for r in adjusted[0].get("history", [])
                if r["epoch"] == adjusted[0]["best_epoch"]
            ]
            if at_best and at_best[0] is not None:
                alpha = f"{at_best[0]:.2f}"
        lines.append(table_row(f"{a:g}", *cells, alpha))
    return lines + _still_missing(missing)


def case_lines(case: dict) -> list[str]:
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
            table_row("user", "target (score, rank)", "top negatives: item (score, Q)")
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
            lines.append(table_row(user["user"], target, negs))
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

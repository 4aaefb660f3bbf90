"""The report page: report.md and results.json from the finished runs."""

from __future__ import annotations

import os

from genni.pipeline.training import rundir
from research.claims import verdicts
from research.paper import four_metrics
from research.sections import (
    ROW_NAMES,
    SECTIONS,
    USE_SPEED,
    case_lines,
    table_row,
)
from research.table import NotRun, collect

REPORT_FILE = "report.md"
RESULTS_FILE = "results.json"


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
    paper = {
        label: row for label, row in four_metrics(dataset).items() if label in ROW_NAMES
    }
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
        lines += case_lines(case)
    else:
        lines += [
            "Not run yet: it trains after the grid "
            "(`genni report` without `--report-only`).",
            "",
        ]
    found = verdicts(table)
    lines += [
        "## The paper's claims",
        "",
        "| claim | reproduced | numbers |",
        "|---|---|---|",
    ]
    marks = {True: "yes", False: "no", None: "not run"}
    lines += [table_row(c, marks[ok], why) for c, ok, why in found]
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
            {"claim": c, "reproduced": ok, "numbers": why} for c, ok, why in found
        ],
    }
    rundir.write_json(os.path.join(output, RESULTS_FILE), summary)
    return text

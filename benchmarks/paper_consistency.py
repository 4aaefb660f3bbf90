"""Can the paper's rows come from one set of rankings? And do ours?

With one target per user, a user counted by HR@10 but not HR@5 ranks 6th to
10th and adds between 1/log2(11) and 1/log2(7) to NDCG@10 - NDCG@5. So
NDCG@10 - NDCG@5 must lie in [0.289, 0.356] x (HR@10 - HR@5); means over users
and seeds keep the bounds (`genni.components.metrics.ndcg_gap_bounds`). A row
outside them (after allowing for rounding to two decimals) mixes numbers from
different runs, epochs or definitions. For such a row it also gives the
largest HR@10 that the row's HR@5, NDCG@5 and NDCG@10 allow.

    python benchmarks/paper_consistency.py [RUN_METRICS_JSON | RECORD_JSONL ...]

Without arguments it checks the paper's rows and every run of the record
benchmarks/results/runs.jsonl (our finished runs: a failure there is a bug in
our metrics). Writes results/paper_consistency.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from _common import RECORD, machine, write_results

from genni.components.metrics import metrics_consistent, ndcg_gap_bounds
from research import records
from research.paper import METRICS as FOUR
from research.paper import PAPER


def largest_hr10(metrics: dict[str, float]) -> float:
    """The largest HR@10 that HR@5, NDCG@5 and NDCG@10 allow (rounding aside)."""
    least, _ = ndcg_gap_bounds(0.0, 1.0)  # NDCG@10 gained per unit of HR@10 - HR@5.
    return metrics["HR@5"] + (metrics["NDCG@10"] - metrics["NDCG@5"]) / least


def check(name: str, metrics: dict[str, float]) -> dict:
    ok, why = metrics_consistent(metrics)
    return {
        "row": name,
        **{m: round(metrics[m], 2) for m in FOUR},
        "consistent": ok,
        "why": why,
        "largest_hr10": round(largest_hr10(metrics), 2),
    }


def runs_test(paths: list[str]) -> list[tuple[str, dict[str, float]]]:
    """(name, test metrics) of each run: a record's runs by their names, a
    metrics.json by its file name."""
    found = []
    for path in paths:
        if path.endswith(records.RECORD_SUFFIX):
            found += [(r["name"], r["test"]) for r in records.read(path)]
            continue
        with open(path) as f:
            test = json.load(f)["test"]
        found.append((os.path.splitext(os.path.basename(path))[0], test))
    return found


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs",
        nargs="*",
        help="metrics.json files of finished runs, or record files (default: "
        "results/runs.jsonl)",
    )
    args = parser.parse_args(argv)
    paper = [
        check(f"paper {dataset} {variant}", metrics)
        for dataset, rows in PAPER.items()
        for variant, metrics in rows.items()
        if all(m in metrics for m in FOUR)
    ]
    ours = [check(name, test) for name, test in runs_test(args.runs or [str(RECORD)])]

    lines = [
        "# Paper rows vs the HR/NDCG bound",
        "",
        "NDCG@10 - NDCG@5 must lie between (HR@10 - HR@5) / log2(11) and "
        "(HR@10 - HR@5) / log2(7) for any rankings with one target per user "
        "(rounding to two decimals allowed for). The last column is the "
        "largest HR@10 that the row's HR@5, NDCG@5 and NDCG@10 allow.",
        "",
        "| row | HR@5 | HR@10 | NDCG@5 | NDCG@10 | consistent | bound "
        "| HR@10 at most (from the other three) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in paper + ours:
        lines.append(
            f"| {r['row']} | "
            + " | ".join(f"{r[m]:.2f}" for m in FOUR)
            + f" | {'yes' if r['consistent'] else '**no**'} | {r['why']} | "
            f"{r['largest_hr10']:.2f} |"
        )
    bad_ours = [r["row"] for r in ours if not r["consistent"]]
    lines += [
        "",
        f"Paper rows outside the bound: "
        f"{', '.join(r['row'] for r in paper if not r['consistent']) or 'none'}.",
        f"Our runs outside the bound: {', '.join(bad_ours) or 'none'} "
        f"(of {len(ours)}).",
        "",
        "Command: `python benchmarks/paper_consistency.py"
        + "".join(f" {p}" for p in args.runs)
        + "`",
    ]
    results = {"machine": machine(), "paper": paper, "ours": ours}
    write_results("paper_consistency", results, "\n".join(lines) + "\n")
    print("\n".join(lines))
    if bad_ours:
        sys.exit(f"Our own metrics break the bound: {', '.join(bad_ours)}")
    return results


if __name__ == "__main__":
    main()

"""`genni report`: the paper's tables and figures regenerated on a dataset."""

from __future__ import annotations

import argparse

REPORT_DATASETS = ("beauty", "toys")  # Those with the paper's numbers.


def _report(args: argparse.Namespace, extra: list[str]) -> int:
    from genni.pipeline.reproduce import report

    command = report.command_line(args)  # Shell-quoted, relative paths.
    report.report(
        args.data,
        args.output,
        runs_dir=args.runs_dir,
        quick=args.quick,
        seeds=args.seeds,
        dataset=args.paper,
        commands=[command],
        report_only=args.report_only,
        pack=args.pack,
        archive=args.archive,
    )
    return 0


def add_report(commands) -> None:
    p = commands.add_parser(
        "report",
        help="The paper's tables and plots regenerated on a dataset.",
        description="Run (or reuse) the grid of `genni train` runs behind the "
        "paper's tables and figures and write REPORT_DIR/report.md with PNG plots: "
        "main and efficiency tables, alpha / beta / k sweeps, BPR with 1..8 "
        "negatives, valid NDCG@10 vs time, self-adjusted alpha, a case study, and "
        "each claim marked reproduced or not. Finished runs are never retrained; "
        "an interrupted grid resumes; report processes sharing one --runs-dir "
        "(each with its own --output) each take the next run no other one is "
        "training.",
    )
    p.add_argument("--data", required=True, help="Output of `genni preprocess`.")
    p.add_argument("--output", required=True, help="Report directory.")
    p.add_argument(
        "--runs-dir", default=None, help="Where runs live (default REPORT_DIR/runs)."
    )
    p.add_argument("--seeds", type=int, default=None, help="Seeds 0..N-1 (full: 4).")
    p.add_argument(
        "--quick", action="store_true", help="Reduced grid: 3 epochs, one seed."
    )
    p.add_argument(
        "--archive",
        default=None,
        help="A record of finished runs, one line each (small enough to "
        "commit, e.g. benchmarks/results/runs.jsonl; .jsonl is added to a new "
        "name; a directory of their metrics.json also works): runs kept there "
        "are restored into --runs-dir instead of trained again, and each run "
        "that finishes is added to it.",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="Train nothing: render from the runs that have finished (the "
        "case study, which trains after the grid, waits for a run without it).",
    )
    p.add_argument(
        "--pack",
        action="store_true",
        help="Train the runs still missing on packed batches (`genni train "
        "--pack`: the same model and loss, several times faster on short "
        "sequences). Finished runs are reused whether packed or not.",
    )
    p.add_argument(
        "--paper",
        choices=REPORT_DATASETS,
        default=None,
        help="Put the paper's numbers for this dataset beside ours.",
    )
    p.set_defaults(handler=_report)

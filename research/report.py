"""`python -m research.report` (`make report`): the paper's tables and figures,
regenerated on your data.

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

This module runs the report; the rest of `research` holds one
concern each, and the names other code uses are importable from here too:

- `paper`: the paper's numbers (the only copy);
- `grid`: the grid of experiments and its runs (`plan`);
- `run_names`: the names of `benchmarks/reproduce.py`'s runs (run keys are
  the product's, `genni.pipeline.training.keys`);
- `records`: the compact archive of finished runs (restore, append);
- `schedule`: the order runs train in, and training them (`run_grid`);
- `table`: the finished runs by experiment and label (`collect`);
- `claims`: the paper's claims as data (text, runs needed, judge);
- `case_study`, `speed`: the case study and the side-by-side step times;
- `sections`, `render`: the report's tables and figures, and its page;
- `commands`: the command lines a report records.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from genni.components import schema
from genni.pipeline.training import rundir
from genni.pipeline.training.keys import (
    LAYOUT_SETTINGS,
    SAMPLER_SETTINGS,
    data_fingerprint,
    existing_runs,
    run_key,
)
from research.case_study import (
    CASE_STUDY_CHECKPOINT,
    CASE_STUDY_FILE,
    case_study,
)
from research.claims import (
    ALPHA_FALL,
    BPR_GAIN,
    CLAIMS,
    Claim,
    claim_runs,
)
from research.claims import verdicts as claims
from research.commands import report_command as command_line
from research.grid import (
    BETA_GROUP,
    FULL,
    MAIN_ALPHA,
    QUICK,
    Grid,
    experiments,
    plan,
)
from research.paper import METRICS, PAPER
from research.records import (
    ARCHIVE_DATASET,
    archive_runs,
    archived_runs,
    restore_runs,
)
from research.render import REPORT_FILE, RESULTS_FILE, render
from research.schedule import (
    Priorities,
    priorities,
    run_grid,
    sketch_runs,
)
from research.sections import (
    ROW_NAMES,
    beta_note,
    case_lines,
    inconsistent_row_note,
)
from research.speed import SPEED_FILE, TIMED, measure_speed
from research.table import NotRun, collect

__all__ = [
    "ALPHA_FALL",
    "ARCHIVE_DATASET",
    "BETA_GROUP",
    "BPR_GAIN",
    "CASE_STUDY_CHECKPOINT",
    "CASE_STUDY_FILE",
    "CLAIMS",
    "FULL",
    "LAYOUT_SETTINGS",
    "MAIN_ALPHA",
    "METRICS",
    "PAPER",
    "QUICK",
    "REPORT_FILE",
    "RESULTS_FILE",
    "ROW_NAMES",
    "SAMPLER_SETTINGS",
    "SPEED_FILE",
    "TIMED",
    "Claim",
    "Grid",
    "NotRun",
    "Priorities",
    "archive_runs",
    "archived_runs",
    "beta_note",
    "case_lines",
    "case_study",
    "claim_runs",
    "claims",
    "collect",
    "command_line",
    "data_fingerprint",
    "existing_runs",
    "experiments",
    "inconsistent_row_note",
    "measure_speed",
    "plan",
    "priorities",
    "render",
    "report",
    "restore_runs",
    "run_grid",
    "run_key",
    "sketch_runs",
]


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

    `archive`: a record of finished runs (`records`; a directory of their
    metrics.json still works): those on `data` come back into `runs_dir`
    first (`restore_runs`), and each run that finishes is added to it
    (`archive_runs`), so results outlive the machine.
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


REPORT_DATASETS = ("beauty", "toys")  # Those with the paper's numbers.


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m research.report",
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
    return p


def main(argv: list[str] | None = None) -> int:
    """`python -m research.report` (or `make report`): run and render."""
    from genni.pipeline import quiet

    args = build_parser().parse_args(argv)
    quiet.configure(False)
    quiet.start_quietly()
    try:
        with quiet.worker_stderr_filtered():
            report(
                args.data,
                args.output,
                runs_dir=args.runs_dir,
                quick=args.quick,
                seeds=args.seeds,
                dataset=args.paper,
                commands=[command_line(args)],  # Shell-quoted, relative paths.
                report_only=args.report_only,
                pack=args.pack,
                archive=args.archive,
            )
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        print(f"research.report: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

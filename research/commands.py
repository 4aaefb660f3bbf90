"""The command lines a report records: shell-quoted, paths relative to the
working directory, so that a report says what to type in a checkout, not
where files were on the machine that made it."""

from __future__ import annotations

import argparse
import os
import shlex


def relative(path: str) -> str:
    """`path` relative to the working directory."""
    return os.path.relpath(path)


def shell_line(words: list[str]) -> str:
    """One command line of `words`, quoted for a POSIX shell."""
    return shlex.join(words)


def report_command(args: argparse.Namespace) -> str:
    """The `python -m research.report` command line of its parsed arguments."""
    words = ["python", "-m", "research.report", "--data", relative(args.data)]
    words += ["--output", relative(args.output)]
    for flag, value, path in (
        ("--runs-dir", args.runs_dir, True),
        ("--seeds", args.seeds, False),
        ("--paper", args.paper, False),
        ("--archive", args.archive, True),
    ):
        if value is not None:
            words += [flag, relative(value) if path else str(value)]
    for flag, on in (
        ("--quick", args.quick),
        ("--report-only", args.report_only),
        ("--pack", args.pack),
    ):
        if on:
            words.append(flag)
    return shell_line(words)

"""Check: the raw Toys review log preprocesses to exactly the S3-Rec Toys data.

`reviews_Toys_and_Games.json.gz` was built from `Toys_and_Games.txt` (reviewer
`A%013d` is user id, asin `B%09d` item id) plus users and items outside the
5-core. `genni preprocess` must give back every sequence, user for user and item
for item, and the paper's dataset size. Skips when ../shared/data is absent.

    python benchmarks/check_toys.py [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

from _common import SHARED_DATA, write_results

from genni.components import schema
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess.config import PreprocessConfig

EXPECTED = {"users": 19412, "items": 11924, "events": 167597}


def expected_sequences(path: str) -> list[str]:
    lines = []
    with open(path) as f:
        for line in f:
            user, *items = line.split()
            raw = " ".join(f"B{int(i):09d}" for i in items)
            lines.append(f"A{int(user):013d}\t{raw}")
    return sorted(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(SHARED_DATA))
    args = parser.parse_args(argv)
    log = os.path.join(args.data_dir, "reviews_Toys_and_Games.json.gz")
    text = os.path.join(args.data_dir, "Toys_and_Games.txt")
    if not (os.path.exists(log) and os.path.exists(text)):
        print(f"Skipped: {log} or {text} not found.")
        return 0
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "toys")
        start = time.perf_counter()
        stats = preprocess.preprocess(PreprocessConfig(input=log, output=out), [])
        seconds = time.perf_counter() - start
        with open(os.path.join(out, schema.SEQUENCES_FILE)) as f:
            got = f.read().splitlines()
        with open(os.path.join(out, schema.ITEMS_FILE)) as f:
            items = f.read().splitlines()
    want = expected_sequences(text)
    mismatched = sum(a != b for a, b in zip(got, want, strict=False))
    checks = {
        "same number of users": len(got) == len(want),
        "every sequence equal": got == want,
        **{f"stats.{k} == {v:,}": stats[k] == v for k, v in EXPECTED.items()},
        "item ids equal the S3-Rec ids": items
        == [f"B{i:09d}" for i in range(1, len(items) + 1)],
    }
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAIL'}] {name}")
    passed = all(checks.values())
    results = {
        "passed": passed,
        "checks": checks,
        "mismatched_lines": mismatched,
        "stats": stats,
        "seconds": round(seconds, 2),
    }
    markdown = (
        "# Toys: raw review log -> S3-Rec sequences\n\n"
        + "\n".join(f"- [{'x' if ok else ' '}] {n}" for n, ok in checks.items())
        + f"\n\nusers {stats['users']:,}, items {stats['items']:,}, events "
        f"{stats['events']:,}; k-core removed {stats['kcore']['users_removed']:,} "
        f"users, {stats['kcore']['items_removed']:,} items, "
        f"{stats['kcore']['events_removed']:,} events in "
        f"{stats['kcore']['rounds']} rounds. Beam DirectRunner: {seconds:.1f} s.\n\n"
        "Command: `python benchmarks/check_toys.py`\n"
    )
    write_results("check_toys", results, markdown)
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

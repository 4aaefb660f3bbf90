"""A sparse log from a dense one: the events of N users drawn at random.

The users are taken as sorted strings, `random.seed(SEED)`, then
`random.sample(users, N)`; every event of theirs is kept, the header too. The
40- and 150-user samples of ml-100k replayed in docs/nightly_loop.md:

    python benchmarks/sample_users.py --input ../shared/data/ml-100k.inter \
        --users 40 --output ml40.inter
"""

from __future__ import annotations

import argparse
import random


def sample(lines: list[str], users: int, seed: int) -> list[str]:
    """The header and the lines of `users` users (tab-separated, user first)."""
    head, rows = lines[0], lines[1:]
    everyone = sorted({row.split("\t")[0] for row in rows})
    if not 1 <= users <= len(everyone):
        raise ValueError(f"--users must be between 1 and {len(everyone)}.")
    random.seed(seed)
    kept = set(random.sample(everyone, users))
    return [head, *(row for row in rows if row.split("\t")[0] in kept)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True, help="A RecBole .inter file.")
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    with open(args.input, encoding="utf-8") as f:
        lines = f.read().splitlines()
    kept = sample(lines, args.users, args.seed)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(kept) + "\n")
    print(f"{args.users} users, {len(kept) - 1:,} events -> {args.output}")


if __name__ == "__main__":
    main()

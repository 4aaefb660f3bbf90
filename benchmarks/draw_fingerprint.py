"""GenNi's draws in every mode at fixed seeds: a fingerprint to compare
across versions, so that a refactor of the sampler is shown to draw exactly
what the code before it drew.

Each mode (exact, a beta share, capped, a V' per group without and with
replacement, per row, successor candidates beside a capped and a per-row V',
the two-level cluster draw), with and without the user's items excluded and
log Q, draws twice from one sampler (its generator moves on) on fixed random
queries; every id and log Q is saved.

    python benchmarks/draw_fingerprint.py OUT.npz        # this checkout
    python benchmarks/draw_fingerprint.py --compare A.npz B.npz

Run the first line at two commits (a worktree each) and compare: issue 43's
split of the draw modes into `components/samplers/draws/` was checked so.
"""

from __future__ import annotations

import argparse
import sys

import _common  # noqa: F401  (the environment the benchmarks share)
import numpy as np

MODES = {
    "exact": {},
    "beta": {"beta": 0.1},
    "capped": {"max_candidates": 256},
    "groups": {"max_candidates": 256, "beta_group": 50},
    "groups_with_replacement": {"max_candidates": 32, "beta_group": 50},
    "per_row": {"max_candidates": 32, "beta_group": 1},
    "successors_capped": {"max_candidates": 256, "successors": 3},
    "successors_per_row": {"max_candidates": 32, "beta_group": 1, "successors": 3},
    "clusters": {"clusters": 16, "cluster_samples": 32},
}


def fingerprint(path: str, items: int = 2000, dim: int = 16, rows: int = 300) -> int:
    import tensorflow as tf

    from genni.components.samplers import GenNiSampler
    from genni.components.samplers.base import BatchContext

    rng = np.random.default_rng(0)
    table = tf.constant(rng.normal(size=(items + 1, dim)).astype(np.float32))
    queries = tf.constant(rng.normal(size=(rows, dim)).astype(np.float32))
    targets = tf.constant(rng.integers(1, items + 1, rows))
    seen = [list(rng.integers(1, items + 1, rng.integers(0, 6))) for _ in range(rows)]
    context = BatchContext(
        user_items=tf.ragged.constant(seen, dtype=tf.int64),
        previous=tf.constant(rng.integers(1, items + 1, rows)),
    )
    successors = rng.integers(0, items + 1, (items + 1, 3))
    out = {}
    for name, settings in MODES.items():
        for exclude in (False, True):
            for log_q in (False, True):
                sampler = GenNiSampler(
                    items, 4, alpha=1.5, seed=3, exclude_seen=exclude, **settings
                )
                if settings.get("successors"):
                    sampler.set_successors(successors)

                @tf.function
                def draw(sampler=sampler, log_q=log_q):
                    return sampler.negatives(
                        queries, targets, table, context, log_q=log_q
                    )

                for step in range(2):
                    ids, q = draw()
                    key = f"{name}_exclude{int(exclude)}_logq{int(log_q)}_{step}"
                    out[key + "_ids"] = ids.numpy()
                    if q is not None:
                        out[key + "_logq"] = q.numpy()
    np.savez(path, **out)
    return len(out)


def compare(a: str, b: str) -> int:
    first, second = np.load(a), np.load(b)
    keys = sorted(set(first.files) | set(second.files))
    differ = [
        k
        for k in keys
        if k not in first.files
        or k not in second.files
        or not np.array_equal(first[k], second[k])
    ]
    print(f"{len(keys)} arrays compared; {len(differ)} differ")
    for k in differ:
        print(f"  {k}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", help="Where to write the draws (.npz).")
    parser.add_argument("--compare", nargs=2, metavar="NPZ", help="Two fingerprints.")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.output:
        parser.error("give OUT.npz, or --compare A.npz B.npz")
    print(f"{fingerprint(args.output)} arrays written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

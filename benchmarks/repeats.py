"""Repeated items, end to end through the real commands (issue 28).

A log where every next item repeats the item two steps back (each user
alternates two items: a b a b ...). Runs `genni preprocess` (Beam), then
`genni train` under `--candidates all` and `--candidates new`, `genni
evaluate`, and `genni export` with each rule, and asks each SavedModel for the
top-10 of sample users. Shows:

- the repeat shares that preprocessing prints and writes to stats.json;
- `--candidates all` reaching test HR@10 above 90% in a few epochs;
- `--candidates new` printing the warning and the repeat count, every
  repeated target a miss;
- the served top-K following the rule: history items come back only under
  `all`.

    python benchmarks/repeats.py [--users 2000] [--items 500] [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _common import ROOT, publish

SAMPLE_USERS = 200


def genni(*args: str) -> str:
    """Run a `genni` command as a user would; its output, echoed."""
    command = [sys.executable, "-m", "genni.pipeline.cli.main", *args]
    print("$ genni " + " ".join(args), flush=True)
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, check=False
    )
    print(done.stdout + done.stderr, flush=True)
    if done.returncode:
        raise RuntimeError(f"genni {args[0]} failed ({done.returncode})")
    return done.stdout


def write_log(path: str, users: int, items: int, length: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for user in range(users):
            a, b = rng.choice(items, 2, replace=False)
            f.write(f"u{user} " + " ".join([f"i{a}", f"i{b}"] * (length // 2)) + "\n")


def served(path: str, histories: list[list[str]]) -> list[list[str]]:
    import tensorflow as tf

    model = tf.saved_model.load(path)
    width = max(len(h) for h in histories)
    out = model.signatures["serving_default"](
        history=tf.constant([h + [""] * (width - len(h)) for h in histories])
    )
    return [[i.decode() for i in row] for row in out["item_ids"].numpy()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="genni_repeats_")
    log, data = os.path.join(tmp, "log.txt"), os.path.join(tmp, "data")
    write_log(log, args.users, args.items, args.length, args.seed)
    preprocess_out = genni("preprocess", "--input", log, "--output", data)
    with open(os.path.join(data, "stats.json")) as f:
        repeats = json.load(f)["repeats"]

    runs, outputs = {}, {}
    small = ["--epochs", str(args.epochs), "--quiet", "--learning-rate", "0.005"]
    for rule in ("all", "new"):
        run = os.path.join(tmp, f"run_{rule}")
        outputs[rule] = genni(
            "train", "--data", data, "--output", run, "--candidates", rule, *small
        )
        with open(os.path.join(run, "metrics.json")) as f:
            runs[rule] = json.load(f)
    evaluate_out = genni("evaluate", "--run", os.path.join(tmp, "run_all"))

    with open(os.path.join(data, "sequences.tsv")) as f:
        users = [line.split("\t")[1].split() for line in f.read().splitlines()]
    sample = users[:SAMPLE_USERS]
    histories = [seq[:-1] for seq in sample]
    serving = {}
    for rule in ("all", "new"):
        base = os.path.join(tmp, f"models_{rule}")
        genni("export", "--run", os.path.join(tmp, "run_all"), "--output", base,
              "--candidates", rule)  # fmt: skip
        tops = served(os.path.join(base, "1"), histories)
        serving[rule] = {
            "users": len(tops),
            "answers_with_a_history_item": sum(
                bool(set(top) & set(h)) for top, h in zip(tops, histories, strict=True)
            ),
            "target_in_top_10": sum(
                seq[-1] in top for seq, top in zip(sample, tops, strict=True)
            ),
        }
    warned = [line for line in outputs["new"].splitlines() if "Warning" in line]
    repeat_lines = {
        rule: next(line for line in out.splitlines() if "repeat targets" in line)
        for rule, out in outputs.items()
    }
    lines = [
        "# Repeated items: the candidate rule end to end",
        "",
        f"Log: {args.users:,} users alternating two of {args.items:,} items "
        f"(a b a b ..., {args.length} events each): every next item repeats the "
        "item two steps back. `genni preprocess` printed:",
        "",
        "```",
        next(ln for ln in preprocess_out.splitlines() if "repeated items" in ln),
        "```",
        "",
        f"`genni train` ({args.epochs} epochs, test at the best valid epoch):",
        "",
        "| --candidates | test HR@10 | test NDCG@10 | repeat targets (test) |",
        "|---|---|---|---|",
        *(
            f"| {rule} | {runs[rule]['test']['HR@10']:.2f} | "
            f"{runs[rule]['test']['NDCG@10']:.2f} | "
            f"{runs[rule]['repeats']['test']['repeat_targets']:,} of "
            f"{runs[rule]['repeats']['test']['users']:,} |"
            for rule in ("all", "new")
        ),
        "",
        "`--candidates new` printed:",
        "",
        "```",
        *warned,
        repeat_lines["new"],
        "```",
        "",
        f"Served top-10 of the `all` run's SavedModel for {SAMPLE_USERS} users, "
        "exported with each rule:",
        "",
        "| export --candidates | answers holding a history item | target in top-10 |",
        "|---|---|---|",
        *(
            f"| {rule} | {serving[rule]['answers_with_a_history_item']} of "
            f"{serving[rule]['users']} | {serving[rule]['target_in_top_10']} |"
            for rule in ("all", "new")
        ),
    ]
    results = {
        "settings": vars(args),
        "repeats": repeats,
        "runs": {
            rule: {
                "test": runs[rule]["test"],
                "repeats": runs[rule]["repeats"],
                "best_epoch": runs[rule]["best_epoch"],
            }
            for rule in runs
        },
        "warning": warned,
        "evaluate": evaluate_out.splitlines(),
        "serving": serving,
    }
    publish("repeats", lines, results)
    ok = (
        runs["all"]["test"]["HR@10"] > 90.0
        and bool(warned)
        and serving["new"]["answers_with_a_history_item"] == 0
        and serving["all"]["answers_with_a_history_item"] > 0
    )
    print("All checks met." if ok else "Some checks NOT met.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

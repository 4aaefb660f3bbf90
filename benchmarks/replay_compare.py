"""Two replays of one log side by side: each step's served NDCG@10 of a loop,
and a paired bootstrap over the step's users of their difference.

`genni replay` scores each step's served version on the next period's cases
(`genni.pipeline.loop.replay`); two replays of the same log with the same
`--every` and `--steps` (code before and after a change, or two settings)
meet the same cases (where one was stopped early, the steps both have).
Each case is scored again here through both served
SavedModels (the versions the rows name, in each replay's `LOOP/models`), the
per-case NDCG@10 checked against the row's, and the users of a step resampled
with replacement (2,000 rounds, seed 0) for a 95% interval of the
difference, per step and of the mean over the steps (each step resampled on
its own). An interval that holds 0 is a difference within the noise of the
step's users.

    python benchmarks/replay_compare.py --input ml40.inter --every 30 \\
        --before replay40_before --after replay40_after [--loop warm] [--name NAME]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
from _common import write_results

from genni.pipeline.loop.cases import DAY, read_log
from genni.pipeline.loop.scoring import _padded
from genni.pipeline.serving import guard
from genni.pipeline.training import rundir

K = 10


def step_cases(events: dict, start: float, end: float):
    """(users, histories, targets) of the period's cases, as the replay meets
    them (`cases.next_period_cases`), each with its user."""
    users, histories, targets = [], [], []
    for user, timed in events.items():
        for n, (t, item) in enumerate(timed):
            if start < t <= end and n > 0:
                users.append(user)
                histories.append([i for _, i in timed[:n]])
                targets.append(item)
    rows = np.empty(len(histories), dtype=object)  # Ragged: one list a case.
    for n, history in enumerate(histories):
        rows[n] = history
    return users, rows, targets


def case_ndcg(path: str, histories, targets, batch: int = 256) -> np.ndarray:
    """NDCG@10 of each case (0 or 1 / log2(rank + 2)) by the SavedModel."""
    top_k = guard.top_k_signature(path)
    out = []
    for start in range(0, len(targets), batch):
        ranks, _ = guard.served_rankings(
            top_k,
            _padded(histories[start : start + batch]),
            np.asarray(targets[start : start + batch], dtype=object),
        )
        out.append(np.where(ranks < K, 1.0 / np.log2(ranks + 2.0), 0.0))
    return np.concatenate(out)


def served_path(replay: str, loop: str, row: dict) -> str:
    """The SavedModel a row's loop served ('v3', 'v1 (popular)')."""
    version = row[f"{loop}_served"].split()[0].lstrip("v")
    return os.path.join(replay, loop, "models", version)


def bootstrap(steps: list[dict], rounds: int, seed: int = 0) -> np.ndarray:
    """Per round: each step's difference (after - before, %) over its users
    resampled with replacement; [rounds, steps]."""
    rng = np.random.default_rng(seed)
    out = np.zeros((rounds, len(steps)))
    for s, step in enumerate(steps):
        diff, count = step["user_diff"], step["user_cases"]
        n = len(diff)
        for r in range(rounds):
            pick = rng.integers(0, n, n)
            out[r, s] = 100.0 * diff[pick].sum() / count[pick].sum()
    return out


def compare(args) -> dict:
    _, _, events = read_log(args.input)
    rows = {
        side: rundir.read_json(os.path.join(path, "replay.json"))
        for side, path in (("before", args.before), ("after", args.after))
    }
    common = min(len(rows["before"]), len(rows["after"]))  # A replay cut short.
    cuts = {side: [r["cut"] for r in rows[side][:common]] for side in rows}
    if cuts["before"] != cuts["after"]:
        raise SystemExit("The two replays cut the log at other times.")
    steps = []
    for before, after in zip(
        rows["before"][:common], rows["after"][:common], strict=True
    ):
        users, histories, targets = step_cases(
            events, before["cut"], before["cut"] + args.every * DAY
        )
        scores = {}
        for side, row, replay in (
            ("before", before, args.before),
            ("after", after, args.after),
        ):
            scores[side] = case_ndcg(
                served_path(replay, args.loop, row), histories, targets
            )
            said = row[args.loop]["NDCG@10"]
            if not math.isclose(100 * scores[side].mean(), said, abs_tol=1e-3):
                raise SystemExit(
                    f"step {row['step']}, {side}: per-case NDCG@10 "
                    f"{100 * scores[side].mean():.4f} against the replay's {said}"
                )
        order = sorted(set(users))
        index = {u: i for i, u in enumerate(order)}
        slot = np.array([index[u] for u in users])
        steps.append(
            dict(
                step=before["step"],
                cases=len(targets),
                users=len(order),
                before=100 * scores["before"].mean(),
                after=100 * scores["after"].mean(),
                before_served=before[f"{args.loop}_served"],
                after_served=after[f"{args.loop}_served"],
                user_diff=np.bincount(
                    slot, scores["after"] - scores["before"], len(order)
                ),
                user_cases=np.bincount(slot, minlength=len(order)).astype(float),
            )
        )
    rounds = bootstrap(steps, args.rounds)
    table = []
    for s, step in enumerate(steps):
        low, high = np.percentile(rounds[:, s], [2.5, 97.5])
        table.append(
            {k: v for k, v in step.items() if not k.startswith("user_")}
            | dict(diff=step["after"] - step["before"], low=low, high=high)
        )
    means = rounds.mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    mean = dict(
        before=float(np.mean([s["before"] for s in steps])),
        after=float(np.mean([s["after"] for s in steps])),
    )
    mean |= dict(diff=mean["after"] - mean["before"], low=low, high=high)
    return dict(loop=args.loop, steps=table, mean=mean, rounds=args.rounds)


def markdown(result: dict, command: str) -> str:
    lines = [
        f"# Two replays, the {result['loop']} loop: served NDCG@10 (%) per step",
        "",
        "After - before, with a 95% interval from a paired bootstrap over each "
        f"step's users ({result['rounds']:,} rounds); the mean row: the mean "
        "over the steps, each step resampled on its own.",
        "",
        "| step | cases | users | before (serves) | after (serves) | after - before "
        "| 95% interval |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in result["steps"]:
        lines.append(
            f"| {s['step']} | {s['cases']:,} | {s['users']:,} | {s['before']:.2f} "
            f"({s['before_served']}) | {s['after']:.2f} ({s['after_served']}) | "
            f"{s['diff']:+.2f} | {s['low']:+.2f} to {s['high']:+.2f} |"
        )
    m = result["mean"]
    lines += [
        f"| **mean** | | | **{m['before']:.2f}** | **{m['after']:.2f}** | "
        f"**{m['diff']:+.2f}** | {m['low']:+.2f} to {m['high']:+.2f} |",
        "",
        f"Command: `{command}`",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="The replayed log.")
    parser.add_argument("--every", type=float, required=True, help="Its --every, days.")
    parser.add_argument("--before", required=True, help="One replay's --output.")
    parser.add_argument("--after", required=True, help="The other's.")
    parser.add_argument("--loop", default="warm", choices=("warm", "scratch"))
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--name", default="replay_compare")
    args = parser.parse_args(argv)
    result = compare(args)
    command = "python benchmarks/replay_compare.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    text = markdown(result, command)
    write_results(args.name, result, text)
    print(text)


if __name__ == "__main__":
    main()

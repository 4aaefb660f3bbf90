"""Where a replay's items without a trained ID row rank: one step's cases,
its served version as served and with those items left out of each ranking,
over all cases and the warm ones, and how many such items a served top-10
holds.

    python benchmarks/replay_untrained.py --log ml40.inter --replay replay40/ \\
        [--step 1 2 3] [--every 30] [--loop warm] [--offsets]

`--offsets`: what a constant added to the served scores of every item without a
trained row would have done, on the step's own cases (an oracle: the offset is
not fitted on anything the model saw, it is read off the cases it is judged
on, so it bounds what any fitted offset reaches). For each offset: NDCG@10 over
all cases and HR@10 of the cases whose target has no trained row. The offsets
tried: 0, and the 5th to 90th percentiles of each case's gap between its 10th
best trained item and its best untrained one (the offsets that move untrained
items into the top 10 of 5% to 90% of the cases).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import tensorflow as tf

from genni.components.metrics import RankingAccumulator
from genni.pipeline.loop.cases import DAY, next_period_cases, read_log
from genni.pipeline.loop.scoring import _padded, trained_items
from genni.pipeline.serving import export

GAP_PERCENTILES = (5, 10, 25, 50, 75, 90)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="The replayed log.")
    parser.add_argument("--replay", required=True, help="The replay's --output.")
    parser.add_argument("--step", type=int, nargs="+", default=[1])
    parser.add_argument("--every", type=float, default=30.0, help="Its --every, days.")
    parser.add_argument("--loop", default="warm")
    parser.add_argument(
        "--offsets",
        action="store_true",
        help="Also score each step with an offset on the untrained items' scores.",
    )
    args = parser.parse_args(argv)
    with open(os.path.join(args.replay, "replay.json"), encoding="utf-8") as f:
        rows = json.load(f)
    _, _, events = read_log(args.log)
    for step in args.step:
        _step(rows, events, step, args)


def _step(rows: list[dict], events: dict, step: int, args) -> None:
    cut = rows[step - 1]["cut"]
    histories, targets = next_period_cases(events, cut, cut + args.every * DAY)
    version = rows[step - 1][f"{args.loop}_served"].split()[0].lstrip("v")
    path = os.path.join(args.replay, args.loop, "models", version)
    model = tf.saved_model.load(path)
    trained = trained_items(model)
    top_k = model.signatures[export.SIGNATURE_TOP_K]
    out = top_k(
        history=tf.constant(_padded(histories).astype(bytes)),
        k=tf.constant(np.iinfo(np.int32).max),
    )
    answers, scores = out[export.ITEM_IDS].numpy(), out[export.SCORES].numpy()
    real = out[export.NUM_RESULTS].numpy()
    groups = {name: RankingAccumulator() for name in ("served", "trained only")}
    warm = {name: RankingAccumulator() for name in groups}
    in_top10, new_ranks, cases = [], [], []
    for row, target in enumerate(targets):
        ranked = [i.decode() for i in answers[row, : real[row]]]
        for name, order in (
            ("served", ranked),
            ("trained only", [i for i in ranked if i in trained]),
        ):
            rank = np.array([order.index(target) if target in order else len(order)])
            groups[name].update(rank)
            if target in trained:
                warm[name].update(rank)
        in_top10.append(sum(i not in trained for i in ranked[:10]))
        if target not in trained and target in ranked:
            # Its rank, and among the items without a trained row alone.
            untrained = [i for i in ranked if i not in trained]
            new_ranks.append((ranked.index(target), untrained.index(target)))
        if args.offsets:
            untrained = np.array([i not in trained for i in ranked], dtype=bool)
            place = ranked.index(target) if target in ranked else -1
            cases.append((scores[row, : real[row]], untrained, place))
    print(
        f"step {step}: {len(targets)} cases, version {version} ranks "
        f"{len(model.item_strings.numpy()) - 1} items, {len(trained)} trained"
    )
    for label, accumulators in (("all cases", groups), ("warm targets", warm)):
        for name, acc in accumulators.items():
            r = acc.result()
            print(
                f"  {label}, {name}: {acc.count} cases, NDCG@10 {r['NDCG@10']:.2f} "
                f"HR@10 {r['HR@10']:.2f}"
            )
    print(f"  items without a trained row in a served top-10: {np.mean(in_top10):.2f}")
    if new_ranks:
        whole, among = np.array(new_ranks).T
        print(
            f"  targets without a trained row the version ranks: {len(whole)}, "
            f"median rank {np.median(whole):.0f} of every item, "
            f"{np.median(among):.0f} among the untrained; in their top 10: "
            f"{100 * np.mean(among < 10):.2f}%"
        )
    if args.offsets:
        untrained_targets = np.array([t not in trained for t in targets])
        for offset, (all_cases, new) in offset_scores(cases, untrained_targets):
            print(
                f"  offset {offset:5.2f}: all NDCG@10 {all_cases:.2f}, "
                f"untrained targets HR@10 {new:.2f} ({untrained_targets.sum()} cases)"
            )


def offset_scores(cases: list, untrained_targets: np.ndarray) -> list:
    """[(offset, (NDCG@10 of all cases, HR@10 of the untrained targets))]
    for offset 0 and the GAP_PERCENTILES of the cases' gaps. `cases`:
    (scores in served order, which of them are untrained, the target's
    place in that order or -1)."""
    gaps = [
        np.sort(s[~u])[-10] - s[u].max()
        for s, u, _ in cases
        if u.any() and (~u).sum() >= 10
    ]
    offsets = [0.0, *np.percentile(gaps, GAP_PERCENTILES)] if gaps else [0.0]
    results = []
    for offset in offsets:
        all_cases, new = RankingAccumulator(), RankingAccumulator()
        for (s, u, place), is_new in zip(cases, untrained_targets, strict=True):
            if place < 0:
                rank = len(s)
            else:  # Items scored above the target once the offset is added.
                moved = s + offset * u
                rank = int(np.sum(moved > moved[place]))
            all_cases.update(np.array([rank]))
            if is_new:
                new.update(np.array([rank]))
        hr = new.result()["HR@10"] if new.count else float("nan")
        results.append((float(offset), (all_cases.result()["NDCG@10"], hr)))
    return results


if __name__ == "__main__":
    main()

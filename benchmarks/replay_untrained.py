"""Where a replay's items without a trained ID row rank: one step's cases,
its served version as served and with those items left out of each ranking,
over all cases and the warm ones, and how many such items a served top-10
holds.

    python benchmarks/replay_untrained.py --log ml40.inter --replay replay40/ \\
        [--step 1] [--every 30] [--loop warm]
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, help="The replayed log.")
    parser.add_argument("--replay", required=True, help="The replay's --output.")
    parser.add_argument("--step", type=int, default=1)
    parser.add_argument("--every", type=float, default=30.0, help="Its --every, days.")
    parser.add_argument("--loop", default="warm")
    args = parser.parse_args(argv)
    with open(os.path.join(args.replay, "replay.json"), encoding="utf-8") as f:
        rows = json.load(f)
    _, _, events = read_log(args.log)
    cut = rows[args.step - 1]["cut"]
    histories, targets = next_period_cases(events, cut, cut + args.every * DAY)
    version = rows[args.step - 1][f"{args.loop}_served"].split()[0].lstrip("v")
    path = os.path.join(args.replay, args.loop, "models", version)
    model = tf.saved_model.load(path)
    trained = trained_items(model)
    top_k = model.signatures[export.SIGNATURE_TOP_K]
    answers = top_k(
        history=tf.constant(_padded(histories).astype(bytes)),
        k=tf.constant(np.iinfo(np.int32).max),
    )[export.ITEM_IDS].numpy()
    groups = {name: RankingAccumulator() for name in ("served", "trained only")}
    warm = {name: RankingAccumulator() for name in groups}
    in_top10, new_ranks = [], []
    for answer, target in zip(answers, targets, strict=True):
        ranked = [i.decode() for i in answer if i]
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
    print(
        f"step {args.step}: {len(targets)} cases, version {version} ranks "
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


if __name__ == "__main__":
    main()

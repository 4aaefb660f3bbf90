"""How the items never trained on stand against the others over the whole
catalog: a tower run's test cases ranked with the cold items' vectors scaled
by each factor g (1: as trained), cold / warm / all HR@10.

A diagnostic of the cold-start split (`genni preprocess --hold-out-items`,
docs/cold_start.md), not a setting: it shows the trade-off between cold hits
over the whole catalog and warm hits that a boost for new items would move
along.

    python benchmarks/cold_scale.py --run RUN [--scales 1 1.2 1.4] [--name cold_scale]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _common import machine, write_results

from genni.components import schema
from genni.pipeline.training.data import Dataset
from genni.pipeline.training.model import load_run, read_config


def hits(scores: np.ndarray, targets: np.ndarray, histories: list) -> np.ndarray:
    """Whether each target ranks in the top 10 (history and padding left out,
    ties counted against it as the Evaluator's strict rank does)."""
    scores[:, 0] = -np.inf
    for row, history in enumerate(histories):
        scores[row, history] = -np.inf
    target = scores[np.arange(len(targets)), targets]
    return (scores > target[:, None]).sum(axis=1) < 10


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--scales", nargs="+", type=float, default=[1, 1.2, 1.4])
    parser.add_argument("--name", default="cold_scale")
    args = parser.parse_args(argv)
    dataset = Dataset.open(read_config(args.run).data)
    model = load_run(args.run, None, dataset)
    table = model.item_embeddings.numpy()
    cold = np.zeros(len(table), bool)
    cold[dataset.cold_items()] = True
    queries, targets, histories = [], [], []
    for features in dataset.batches("test", 1024):
        queries.append(model.query_embeddings(features[schema.INPUT_IDS]).numpy())
        targets.append(features[schema.TARGET].numpy())
        histories += features[schema.HISTORY].to_list()
    queries, targets = np.concatenate(queries), np.concatenate(targets)
    rows = []
    for scale in args.scales:
        scaled = np.where(cold[:, None], table * scale, table)
        hit = np.concatenate(
            [
                hits(
                    queries[s : s + 2048] @ scaled.T,
                    targets[s : s + 2048],
                    histories[s : s + 2048],
                )
                for s in range(0, len(queries), 2048)
            ]
        )
        is_cold = cold[targets]
        rows.append(
            {
                "scale": scale,
                "cold HR@10": float(100 * hit[is_cold].mean())
                if is_cold.any()
                else None,
                "warm HR@10": float(100 * hit[~is_cold].mean()),
                "all HR@10": float(100 * hit.mean()),
            }
        )
        print(rows[-1], flush=True)
    command = "python benchmarks/cold_scale.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    lines = ["| g | cold HR@10 | warm HR@10 | all HR@10 |", "|---|---|---|---|"]
    for r in rows:
        cold_hr = "" if r["cold HR@10"] is None else f"{r['cold HR@10']:.2f}"
        warm, every = f"{r['warm HR@10']:.2f}", f"{r['all HR@10']:.2f}"
        lines.append(f"| {r['scale']:g} | {cold_hr} | {warm} | {every} |")
    markdown = "\n".join(
        [
            "# Cold items scaled by g",
            "",
            f"Run: `{args.run}`",
            "",
            *lines,
            "",
            f"Command: `{command}`",
            "",
        ]
    )
    write_results(
        args.name, {"machine": machine(), "run": args.run, "rows": rows}, markdown
    )


if __name__ == "__main__":
    main()

"""How the items never trained on stand against the others over the whole
catalog: a tower run's test cases ranked with the cold items' vectors scaled
by each factor g (1: as trained), cold / warm / all HR@10.

A diagnostic of the cold-start split (`genni preprocess --hold-out-items`,
docs/cold_start.md), not a setting: it shows the trade-off between cold hits
over the whole catalog and warm hits that a boost for new items would move
along.

With `--attributes-alone`, a last row ranks every item, trained or not, by
its attribute vector alone: the tower's attribute path as a content ranking.

    python benchmarks/cold_scale.py --run RUN [--scales 1 1.2 1.4]
        [--attributes-alone] [--name cold_scale]
"""

from __future__ import annotations

import argparse
import collections
import sys

import numpy as np
import tensorflow as tf
from _common import machine, write_results

from genni.pipeline.training.data import Dataset
from genni.pipeline.training.evaluate import Evaluator
from genni.pipeline.training.model import load_run, read_config


class WithTable:
    """A model whose item vectors are `table`, as the Evaluator reads a model
    (its item vectors, and queries that read histories through them)."""

    def __init__(self, model, table: tf.Tensor):
        self.model = model
        self.item_embeddings = table

    def query_embeddings(self, input_ids, item_table=None):
        return self.model.query_embeddings(input_ids, item_table)

    def packed_query_embeddings(self, packed, batch_size, item_table=None):
        return self.model.packed_query_embeddings(packed, batch_size, item_table)


def look_alikes(dataset) -> dict:
    """How many catalog items share each held-out item's exact attribute set
    (itself counted): what a vector of attributes alone cannot tell apart."""
    attributes = dataset.item_attributes() or {}
    sets = [
        frozenset(map(str, attributes.get(str(i), [])))
        for i in range(1, dataset.num_items + 1)
    ]
    size = collections.Counter(sets)
    counts = np.array([size[sets[i - 1]] for i in dataset.cold_items()])
    if not counts.size:
        return {}
    return {
        "held-out items": int(counts.size),
        "median items with the same set": float(np.median(counts)),
        "share with 10 or more": float(np.mean(counts >= 10)),
        "share alone": float(np.mean(counts == 1)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--scales", nargs="+", type=float, default=[1, 1.2, 1.4])
    parser.add_argument(
        "--attributes-alone",
        action="store_true",
        help="add a row with every item's vector its attributes alone",
    )
    parser.add_argument("--name", default="cold_scale")
    args = parser.parse_args(argv)
    config = read_config(args.run)
    dataset = Dataset.open(config.data)
    model = load_run(args.run, None, dataset)
    cold = np.zeros(dataset.num_items + 1, bool)
    cold[dataset.cold_items()] = True
    alike = look_alikes(dataset)
    print("look-alikes:", alike, flush=True)
    table = model.item_embeddings
    tables = {
        scale: tf.where(cold[:, None], table * scale, table) for scale in args.scales
    }
    if args.attributes_alone:
        # Every item, trained or not, by its attributes alone: the tower's
        # attribute path as a content ranking, on equal terms for all items.
        tables["attributes alone"] = model.encoder.item_tower.attribute_vectors()
    # The test report's ranking and its cold / warm cases (`by_target`), one
    # evaluator for every table: its batches and traced ranking are built once.
    evaluator = Evaluator(
        dataset, "test", config.pack, config.candidates, by_target=True
    )
    rows = []
    for scale, vectors in tables.items():
        every = evaluator(WithTable(model, vectors))
        by = evaluator.by_target
        rows.append(
            {
                "scale": scale,
                "cold HR@10": by["cold"]["HR@10"] if by else None,
                "warm HR@10": by["warm"]["HR@10"] if by else every["HR@10"],
                "all HR@10": every["HR@10"],
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
        g = r["scale"] if isinstance(r["scale"], str) else f"{r['scale']:g}"
        lines.append(f"| {g} | {cold_hr} | {warm} | {every} |")
    markdown = "\n".join(
        [
            "# Cold items scaled by g",
            "",
            f"Run: `{args.run}`",
            "",
            *lines,
            "",
            *(
                [
                    f"Held-out items sharing their exact attribute set: median "
                    f"{alike['median items with the same set']:g} catalog items "
                    f"with the same set (itself counted), "
                    f"{100 * alike['share with 10 or more']:.1f}% with 10 or more, "
                    f"{100 * alike['share alone']:.1f}% alone; "
                    f"{alike['held-out items']:,} held-out items.",
                    "",
                ]
                if alike
                else []
            ),
            f"Command: `{command}`",
            "",
        ]
    )
    write_results(
        args.name,
        {"machine": machine(), "run": args.run, "rows": rows, "look_alikes": alike},
        markdown,
    )


if __name__ == "__main__":
    main()

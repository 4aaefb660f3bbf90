"""S3-Rec pre-training epoch time beside SASRec training epochs, in one run.

Trains, in one process and one after another, SASRec with uniform negatives,
SASRec_GenNi (beta 1) and S3-Rec pre-training, each for `--epochs` epochs on
the same data, and reports the median time of the epochs after the first (the
first also traces the graphs). A pre-training epoch covers every prefix of
every training sequence (as the S3-Rec code), about 7x the users on Beauty,
with four encoder passes per batch.

    python benchmarks/pretrain_speed.py [--data DIR] [--epochs 3]

DIR must hold `item_attributes.json` (`genni preprocess --item-attributes`);
without --data, ../shared/data/Beauty.txt and its attributes are preprocessed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

from _common import beauty_data, machine, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first one traces graphs).")

    from genni.components import schema
    from genni.pipeline.training import pretrain, train
    from genni.pipeline.training.config import PretrainConfig, TrainConfig

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or beauty_data(tmp, attributes=True)
        info = schema.DatasetInfo.load(data)
        rows = {}
        for name, sampler in (
            ("SASRec (uniform)", "uniform"),
            ("SASRec_GenNi", "genni"),
        ):
            result = train.train(
                TrainConfig.of(
                    data=data,
                    output=os.path.join(tmp, name.split()[0] + sampler),
                    sampler=sampler,
                    epochs=args.epochs,
                ),
                verbose=0,
            )
            seconds = [r["train_seconds"] for r in result["history"][1:]]
            rows[name] = {
                "seconds_per_epoch": statistics.median(seconds),
                "examples_per_epoch": info.num_train_examples,
            }
        state = pretrain.pretrain(
            PretrainConfig.of(
                data=data, output=os.path.join(tmp, "pre"), epochs=args.epochs
            ),
            verbose=0,
        )
        rows["S3-Rec pre-training"] = {
            "seconds_per_epoch": statistics.median(
                r["seconds"] for r in state["history"][1:]
            ),
            "examples_per_epoch": state["examples"],
        }
    base = rows["SASRec (uniform)"]["seconds_per_epoch"]
    lines = [
        "# S3-Rec pre-training vs SASRec training, seconds per epoch (one run)",
        "",
        f"Data: `{args.data or 'Beauty (../shared/data)'}`, {info.num_users:,} users, "
        f"{info.num_items:,} items; median of epochs 2..{args.epochs}; "
        f"{machine()['cpus']} CPUs.",
        "",
        "| run | examples / epoch | s / epoch | vs SASRec uniform |",
        "|---|---|---|---|",
    ]
    for name, row in rows.items():
        row["ratio_to_uniform"] = row["seconds_per_epoch"] / base
        lines.append(
            f"| {name} | {row['examples_per_epoch']:,} "
            f"| {row['seconds_per_epoch']:.1f} | {row['ratio_to_uniform']:.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(
        "pretrain_speed",
        {"machine": machine(), "epochs": args.epochs, "rows": rows},
        text,
    )


if __name__ == "__main__":
    main()

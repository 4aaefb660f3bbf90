"""Encoder x loss/sampler (issue 53): quality from the record, cost side by side.

Quality: every run of the project's record (`benchmarks/results/runs.jsonl`)
on the chosen data sets that trained one of the three trainings below at the
presets' model and optimizer settings (width 64, 2 blocks of 2 heads, dropout
0.5, Adam at a constant 1e-3, batches of 256, FilterMix's filter at its defaults, from
scratch), grouped by data, encoder, training and batch layout: mean ± std
over its seeds of validation NDCG@10, test HR@10 and NDCG@10, the best
epochs, and the seconds per epoch each run measured (on whatever else the
machine ran then).

Cost: with `--time`, one training step of every encoder under every
training, packed, timed side by side in one process on `--data`
(`research.speed.step_times`, interleaved rounds), as a ratio to SASRec's
under the recommended training: the same number of steps make an epoch, so
this is the epoch ratio, free of the load the runs met.

Trainings:
  recommended  GenNi negatives (alpha 1), 64 of them, sampled softmax with the
               log Q correction (`genni train`'s default)
  paper        GenNi negatives (alpha 2.5), one, the paper's BCE (`--preset paper`)
  softmax      the full softmax over every item (`--loss softmax`; no sampler)

    python benchmarks/ablation.py [--data-sets Beauty Toys] [--time --data DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from _common import DATASETS, RECORD, mean_std, publish, timing_parser, training_of

from genni.models.config import FIRST_ENCODER
from genni.models.encoders import registry
from genni.pipeline.training.config import DEFAULT_PRESET, PRESETS, preset

TRAININGS = ("recommended", "paper", "softmax")
# The settings every compared run shares (a record without one had its
# default); a run that changed any of them is another experiment. The rate is
# constant in every cell, the paper's preset's way (the recommended preset
# has halved it every 2,000 steps since its cells were run).
SHARED = dict(
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    dropout=0.5,
    attention_dropout=0.5,
    learning_rate=1e-3,
    lr_half_life=None,
    batch_size=256,
    filter_alpha=0.7,
    filter_window=10,
    init_from=None,
    warm_start=None,
)
# A GenNi training's draw, at the presets' values (beyond each preset's own).
GENNI_DRAW = dict(
    beta=1.0,
    beta_growth=None,
    beta_group=None,
    alpha_step=None,
    gamma=1.0,
    exclude_seen=False,
    clusters=None,
    successors=None,
)


def cell_of(config: dict) -> str | None:
    """The training a recorded run's settings are, or None (another experiment)."""
    training = training_of(config)
    if training is None:
        return None
    if any(config.get(k, v) != v for k, v in SHARED.items()):
        return None
    if training == "softmax":
        return training
    wanted = {k: PRESETS[training][k] for k in ("loss", "num_negatives", "alpha")}
    wanted.update(GENNI_DRAW)
    if training == "recommended":
        wanted["logq_correction"] = True
    if any(config.get(k, v) != v for k, v in wanted.items()):
        return None
    return training


def recorded(path, data_sets: list[str]) -> dict[tuple, list[dict]]:
    """(data, encoder, training, packed) -> the runs of that cell."""
    cells: dict[tuple, list[dict]] = {}
    with open(path) as f:
        for line in f:
            run = json.loads(line)
            config = run.get("config", {})
            data = DATASETS.get(json.loads(run["dataset"]).get("users"))
            training = cell_of(config)
            if data not in data_sets or training is None or "valid" not in run:
                continue
            encoder = config.get("encoder", FIRST_ENCODER)
            key = (data, encoder, training, bool(config.get("pack")))
            cells.setdefault(key, []).append(run)
    return cells


def configs() -> dict[str, dict]:
    """The side-by-side timing's configurations: every encoder x training,
    packed, with the cells' shared settings (a constant rate)."""
    out = {}
    for training in TRAININGS:
        if training == "softmax":
            settings = dict(preset(DEFAULT_PRESET), loss="softmax")
        else:
            settings = preset(training)
        settings.update(pack=True, lr_half_life=SHARED["lr_half_life"])
        for name in registry.names():
            out[f"{name}, {training}"] = dict(settings, encoder=name)
    return out


def _cell(values: list[float]) -> str:
    return f"{values[0]:.2f}" if len(values) == 1 else mean_std(values)


def rows_of(cells: dict[tuple, list[dict]], ratios: dict[str, float]) -> list[dict]:
    rows = []
    order = {name: i for i, name in enumerate(TRAININGS)}
    for key in sorted(cells, key=lambda k: (k[0], order[k[2]], k[1], not k[3])):
        data, encoder, training, packed = key
        # One run per seed: the newest recorded (a seed run twice, e.g. under
        # two patiences, counts once).
        by_seed = {r["config"].get("seed", 0): r for r in cells[key]}
        runs = [by_seed[seed] for seed in sorted(by_seed)]
        rows.append(
            dict(
                data=data,
                encoder=encoder,
                training=training,
                packed=packed,
                patience=sorted({r["config"].get("patience") for r in runs}),
                seeds=[r["config"].get("seed", 0) for r in runs],
                valid_ndcg10=[r["valid"]["NDCG@10"] for r in runs],
                test_hr10=[r["test"]["HR@10"] for r in runs],
                test_ndcg10=[r["test"]["NDCG@10"] for r in runs],
                best_epochs=[r["best_epoch"] for r in runs],
                seconds_per_epoch=[r.get("seconds_per_epoch") for r in runs],
                step_ratio=ratios.get(f"{encoder}, {training}"),
                names=[r["name"] for r in runs],
            )
        )
    return rows


def markdown(rows: list[dict], timing: dict | None) -> list[str]:
    base = f"{FIRST_ENCODER}, {DEFAULT_PRESET}"
    lines = [
        "# Encoder x loss/sampler",
        "",
        "From the record (`benchmarks/results/runs.jsonl`): every run at the "
        "presets' model settings, mean ± std over its seeds, in %. "
        "s / epoch as each run measured it (training only, under whatever load "
        "the machine had)"
        + (
            f"; x {base}: one packed training step's cost, side by side in one "
            "process (the epoch ratio)."
            if timing
            else "."
        ),
        "",
        "| data | training | encoder | packed | patience | seeds | valid NDCG@10 | "
        "test HR@10 | test NDCG@10 | best epochs | s / epoch (runs) | "
        f"x {base} (side by side) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        seconds = [s for s in r["seconds_per_epoch"] if s]
        epoch = f"{statistics.median(seconds):.1f}" if seconds else ""
        ratio = f"{r['step_ratio']:.2f}" if r["step_ratio"] else ""
        lines.append(
            f"| {r['data']} | {r['training']} | {r['encoder']} | "
            f"{'yes' if r['packed'] else 'no'} | "
            f"{', '.join(str(p) for p in r['patience'])} | "
            f"{', '.join(str(s) for s in r['seeds'])} | {_cell(r['valid_ndcg10'])} | "
            f"{_cell(r['test_hr10'])} | {_cell(r['test_ndcg10'])} | "
            f"{', '.join(str(e) for e in r['best_epochs'])} | "
            f"{epoch} | {ratio} |"
        )
    if timing:
        lines += [
            "",
            f"Side by side: {timing['steps']} steps per configuration and round, "
            f"median of {timing['rounds']} interleaved rounds, packed, on "
            f"`{timing['data']}`.",
            "",
            f"| training | encoder | ms / step | x {base} |",
            "|---|---|---|---|",
        ]
        for name, seconds in timing["median"].items():
            encoder, training = name.split(", ")
            lines.append(
                f"| {training} | {encoder} | {1000 * seconds:.0f} | "
                f"{timing['ratios'][name]:.2f} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, rounds=5)
    parser.epilog = __doc__.split("\n\n", 1)[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--record", default=str(RECORD))
    parser.add_argument("--data-sets", nargs="+", default=["Beauty", "Toys"])
    parser.add_argument(
        "--time",
        action="store_true",
        help="Also time every encoder x training's step side by side on --data.",
    )
    args = parser.parse_args(argv)
    unknown = set(args.data_sets) - set(DATASETS.values())
    if unknown:
        known = sorted(DATASETS.values())
        parser.error(f"--data-sets: unknown {sorted(unknown)}; known: {known}")
    timing, ratios = None, {}
    if args.time:
        if not args.data:
            parser.error("--time needs --data.")
        from research import speed

        times = speed.step_times(args.data, configs(), args.rounds, args.steps)
        median = {name: statistics.median(t) for name, t in times.items()}
        reference = median[f"{FIRST_ENCODER}, {DEFAULT_PRESET}"]
        ratios = {name: t / reference for name, t in median.items()}
        timing = dict(
            data=args.data,
            rounds=args.rounds,
            steps=args.steps,
            seconds_per_step=times,
            median=median,
            ratios=ratios,
        )
    rows = rows_of(recorded(args.record, args.data_sets), ratios)
    publish("ablation", markdown(rows, timing), {"rows": rows, "timing": timing})
    return 0


if __name__ == "__main__":
    sys.exit(main())

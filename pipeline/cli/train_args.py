"""The flags of `genni train` (kept apart so `--help` needs no TensorFlow)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from genni.pipeline.training.config import (
    CANDIDATES,
    DEFAULT_DRAW_BUDGET,
    DEFAULT_MAX_CANDIDATES,
    DEFAULT_PRESET,
    LOSSES,
    PRESETS,
    PRETRAIN_SAMPLERS,
    SAMPLERS,
    STRATEGIES,
    PretrainConfig,
    TrainConfig,
    preset,
    settings_with_preset,
)

# What `genni train` trains when no flag is given (the default preset's
# settings over TrainConfig's), shown as the flags' defaults.
DEFAULTS = TrainConfig(data="", output="", **preset(DEFAULT_PRESET))
PAPER = TrainConfig(data="", output="", **preset("paper"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = DEFAULTS
    parser.add_argument("--data", required=True, help="Output of `genni preprocess`.")
    parser.add_argument("--output", required=True, help="Run directory to write.")
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help=f"Named settings under --config and the flags: '{DEFAULT_PRESET}' "
        "(the default: GenNi's negatives under a sampled softmax with the log Q "
        "correction, k 64, alpha 1) or 'paper' (the paper's SASRec_GenNi: BCE, "
        "one GenNi negative, alpha 2.5). A --config file may name one too "
        '("preset": "paper").',
    )
    parser.add_argument(
        "--config",
        default=None,
        help="JSON file of settings (e.g. the best of `genni tune`); flags given "
        "on the command line win.",
    )
    parser.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=None,
        help=f"Negative sampler (default {d.sampler}).",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help=f"GenNi sharpness, 0 = uniform (default {d.alpha}).",
    )
    beta = parser.add_mutually_exclusive_group()
    beta.add_argument(
        "--beta",
        type=float,
        default=None,
        help=f"Fraction of items GenNi scores (default {d.beta}).",
    )
    beta.add_argument(
        "--beta-schedule",
        type=float,
        default=None,
        metavar="M",
        dest="beta_growth",
        help="Growing beta = min(0.001 * 10^(epoch / M), 1).",
    )
    parser.add_argument(
        "--beta-group",
        type=int,
        default=None,
        metavar="G",
        help="Draw GenNi's candidates (its beta fraction, or --max-candidates) "
        "afresh for every G positions (50: about one subset per user, 1: one "
        "per position) instead of once per batch, so that a batch's negatives "
        "do not all come from the same few items. On a large catalog (M at "
        "most 1/32 of it) G 1 draws each position's own M ids at once; "
        "--max-candidates 256 --beta-group 1 --successors 16 is the draw "
        "docs/scale.md measured closest to scoring every item.",
    )
    parser.add_argument(
        "--max-candidates",
        type=int,
        default=None,
        metavar="M",
        help="Most items one GenNi draw scores: beta's share of a larger "
        "catalog is cut to M items (a uniform subset, as beta's), so a draw "
        f"costs the same at 10^6 items as at M. 0: no cap (default "
        f"{DEFAULT_MAX_CANDIDATES:,} in the recommended preset, none in the "
        "paper's).",
    )
    parser.add_argument(
        "--clusters",
        type=int,
        default=None,
        metavar="C",
        help="GenNi's two-level draw: cluster the items into C groups (k-means "
        "on their embeddings, refreshed every --cluster-refresh steps), draw "
        "--cluster-samples candidates a position from the clusters' masses "
        "under its query, and resample its negatives from them by their exact "
        "scores. A position then scores C + R items whatever the catalog "
        "(--beta and --max-candidates do not apply). 0: off (the default).",
    )
    parser.add_argument(
        "--cluster-samples",
        type=int,
        default=None,
        metavar="R",
        help="Candidates a position's two-level draw resamples from (default "
        "64); its law tends to the exact one as R grows.",
    )
    parser.add_argument(
        "--cluster-refresh",
        type=int,
        default=None,
        metavar="STEPS",
        help="Training steps between k-means refreshes of the two-level "
        "draw's clusters (default 100).",
    )
    parser.add_argument(
        "--successors",
        type=int,
        default=None,
        metavar="S",
        help="Beside a capped GenNi draw's uniform candidates (--max-candidates "
        "below the catalog), each position also scores its input item and the "
        "S items that most often followed it in the training data, where a "
        "trained model's mass sits; the uniform ones are weighted up by the "
        "catalog over M, so the draw still estimates GenNi's exact law. 1 + S "
        "more scores a position; nothing changes where every item is scored. "
        "0: off (the default).",
    )
    parser.add_argument(
        "--draw-budget",
        type=int,
        default=None,
        metavar="S",
        help="Most scores a training step's GenNi draws compute, positions x "
        "candidates: on long histories M is cut to the largest power of two "
        "within S / (the mean positions of a batch), so a step's draw costs "
        "about the same whatever the histories' length. 0: no budget "
        f"(default {DEFAULT_DRAW_BUDGET:,} = 2^27 in the recommended preset: "
        "M 8,192 on batches of 43+ positions a user, every item of Beauty's "
        "and Toys'; none in the paper's).",
    )
    parser.add_argument(
        "--self-adjust-alpha",
        type=float,
        default=None,
        metavar="STEP",
        dest="alpha_step",
        help="Let alpha follow the batch loss by STEP per batch.",
    )
    parser.add_argument(
        "--num-negatives",
        type=int,
        default=None,
        help=f"k negatives per position, at most the catalog's items - 1 "
        f"(default {d.num_negatives}).",
    )
    parser.add_argument(
        "--gamma",
        type=float,
        default=None,
        help=f"Popularity exponent (default {d.gamma}).",
    )
    parser.add_argument(
        "--exclude-seen",
        action="store_true",
        default=None,
        help="Never draw the user's own items as negatives (any sampler).",
    )
    parser.add_argument(
        "--loss",
        choices=LOSSES,
        default=None,
        help=f"Loss (default {d.loss}). sampled_softmax: cross-entropy over the "
        "positive and its k negatives, corrected by each negative's draw "
        "probability (log Q).",
    )
    parser.add_argument(
        "--no-logq-correction",
        dest="logq_correction",
        action="store_false",
        default=None,
        help="sampled_softmax without the log Q correction (for ablations).",
    )
    parser.add_argument(
        "--pack",
        action="store_true",
        default=None,
        help="Pack several sequences into each row of a training batch: the "
        "same model outputs and loss, a fraction of the encoder's work (faster "
        "when most sequences are much shorter than the maximum length).",
    )
    add_candidates_argument(parser, f"default {d.candidates}")
    parser.add_argument(
        "--epochs", type=int, default=None, help=f"Most epochs (default {d.epochs})."
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=None,
        help="Epochs without a better valid NDCG@10 before stopping, at least "
        f"(default {DEFAULTS.patience} in the recommended preset, {PAPER.patience} "
        "in the paper's).",
    )
    parser.add_argument(
        "--patience-growth",
        type=float,
        default=None,
        help="Epochs of patience per epoch up to the best so far: training stops "
        "after max(--patience, this x best epoch) epochs without a better one "
        f"(default {DEFAULTS.patience_growth:g} in the recommended preset, whose "
        "curve flattens soon after its best on large logs but climbs for 200 "
        f"epochs on small ones; {PAPER.patience_growth:g}, a fixed patience, in "
        "the paper's; docs/training.md#early-stopping).",
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"Validate every E epochs (default {d.eval_every}).",
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help=f"(default {d.batch_size})"
    )
    parser.add_argument(
        "--learning-rate", type=float, default=None, help=f"(default {d.learning_rate})"
    )
    parser.add_argument(
        "--hidden-size", type=int, default=None, help=f"(default {d.hidden_size})"
    )
    parser.add_argument(
        "--num-layers", type=int, default=None, help=f"(default {d.num_layers})"
    )
    parser.add_argument(
        "--num-heads", type=int, default=None, help=f"(default {d.num_heads})"
    )
    parser.add_argument(
        "--dropout", type=float, default=None, help=f"(default {d.dropout})"
    )
    parser.add_argument("--seed", type=int, default=None, help=f"(default {d.seed})")
    parser.add_argument(
        "--init-from",
        default=None,
        metavar="PRETRAIN_DIR",
        help="Start from the encoder of `genni pretrain` (same model settings).",
    )
    parser.add_argument(
        "--resume", action="store_true", help="Continue the killed run in --output."
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="default",
        help="tf.distribute strategy: 'mirrored' trains data-parallel on every "
        "local GPU; 'multi_worker' on every device of the machines TF_CONFIG "
        "names (run the same command on each; the chief, or worker 0, writes "
        "the run, so --output must be a shared path). --batch-size is then the "
        "global batch. Not a setting of the run: resume under the strategy it "
        "started with to get the same run.",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bars.")


def add_candidates_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """`--candidates`, shared by `genni train`, `evaluate` and `export`."""
    parser.add_argument(
        "--candidates",
        choices=CANDIDATES,
        default=None,
        help="Which items are ranked: 'new' leaves out the items of the user's "
        "history (the paper's protocol: a target that repeats one is a miss); "
        "'all' ranks every item, for domains where people consume the same item "
        f"again (groceries, music, restaurants) ({default}).",
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Settings of `genni train`: TrainConfig's defaults, then the preset
    (--preset, else the --config file's "preset", else DEFAULT_PRESET), then
    --config, then the flags given."""
    values: dict = {}
    if args.config:
        try:
            with open(args.config) as f:
                loaded = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"Cannot read --config {args.config!r}: {e}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"--config {args.config!r} must hold a JSON object.")
        values.update(loaded)
    for field in dataclasses.fields(TrainConfig):
        value = getattr(args, field.name, None)
        if value is not None:
            values[field.name] = value
    if getattr(args, "max_candidates", None) == 0:  # Lift the preset's cap.
        values["max_candidates"] = None
    if getattr(args, "draw_budget", None) == 0:  # And its budget.
        values["draw_budget"] = None
    if getattr(args, "clusters", None) == 0:  # The uniform-subset draw.
        values["clusters"] = None
    if getattr(args, "successors", None) == 0:  # No successor candidates.
        values["successors"] = None
    if values.get("dropout") is not None and "attention_dropout" not in values:
        values["attention_dropout"] = values["dropout"]
    if getattr(args, "preset", None):
        values["preset"] = args.preset
    return TrainConfig.from_dict(settings_with_preset(values))


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `genni pretrain`."""
    d = PretrainConfig(data="", output="")
    parser.add_argument(
        "--data",
        required=True,
        help="Output of `genni preprocess` with item attributes.",
    )
    parser.add_argument("--output", required=True, help="Pre-training directory.")
    parser.add_argument(
        "--epochs", type=int, default=d.epochs, help=f"(default {d.epochs})"
    )
    parser.add_argument(
        "--batch-size", type=int, default=d.batch_size, help=f"(default {d.batch_size})"
    )
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=d.learning_rate,
        help=f"(default {d.learning_rate})",
    )
    parser.add_argument(
        "--mask-probability",
        type=float,
        default=d.mask_probability,
        help=f"Items hidden for MIP/MAP (default {d.mask_probability}).",
    )
    for name, label in (
        ("aap", "associated attribute prediction"),
        ("mip", "masked item prediction"),
        ("map", "masked attribute prediction"),
        ("sp", "segment prediction"),
    ):
        default = getattr(d, f"{name}_weight")
        parser.add_argument(
            f"--{name}-weight",
            type=float,
            default=default,
            help=f"Weight of {label} (default {default}).",
        )
    parser.add_argument(
        "--sampler",
        choices=PRETRAIN_SAMPLERS,
        default=d.sampler,
        help=f"Negatives of masked item prediction (default {d.sampler}).",
    )
    parser.add_argument(
        "--alpha", type=float, default=d.alpha, help="GenNi alpha for --sampler genni."
    )
    parser.add_argument(
        "--num-negatives", type=int, default=d.num_negatives, help="k for MIP."
    )
    for name in ("hidden_size", "num_layers", "num_heads"):
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            type=int,
            default=getattr(d, name),
            help=f"(default {getattr(d, name)}; `genni train` must match)",
        )
    parser.add_argument("--dropout", type=float, default=d.dropout)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument(
        "--resume", action="store_true", help="Continue the killed run in --output."
    )
    parser.add_argument(
        "--strategy",
        choices=[s for s in STRATEGIES if s != "multi_worker"],
        default="default",
        help="tf.distribute strategy: 'mirrored' pre-trains data-parallel on "
        "every local GPU (--batch-size is then the global batch).",
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bars.")


def pretrain_config_from_args(args: argparse.Namespace) -> PretrainConfig:
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(PretrainConfig)
        if hasattr(args, f.name)
    }
    values["attention_dropout"] = args.dropout
    return PretrainConfig.from_dict(values)

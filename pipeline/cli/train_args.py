"""The flags of `genni train` and `genni pretrain` (kept apart so `--help`
needs no TensorFlow).

Every setting's flag is generated from its field (`TrainConfig`,
`PretrainConfig` and the `ModelConfig` and `SamplerConfig` they hold;
`genni.components.settings`): its spelling, type, choices and `--help` line
live with the setting. Here are only the flags that are not settings of a run
(`--preset`, `--config`, `--resume`, `--strategy`, `--quiet`).
"""

from __future__ import annotations

import argparse

from genni.components import settings as fields
from genni.pipeline.training.config import (
    DEFAULT_PRESET,
    PRESETS,
    STRATEGIES,
    PretrainConfig,
    TrainConfig,
    preset,
    run_item_tower,
    settings_with_preset,
)

# What `genni train` trains when no flag is given (the default preset's
# settings over TrainConfig's), shown as the flags' defaults; where another
# preset differs, its value too.
DEFAULTS = TrainConfig.defaults() | preset(DEFAULT_PRESET)
OTHER_PRESETS = {
    name: TrainConfig.defaults() | preset(name)
    for name in sorted(PRESETS)
    if name != DEFAULT_PRESET
}

# `genni pretrain` pre-trains the encoder `genni train` trains by default, so
# that `--init-from` fits it without flags.
PRETRAIN_DEFAULTS = {"encoder": DEFAULTS["encoder"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `genni train`: one per setting, then how the command runs."""
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
    fields.add_flags(
        parser,
        TrainConfig,
        DEFAULTS,
        OTHER_PRESETS,
        required=("data", "output"),
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
    """`--candidates` of `genni evaluate` and `export`, as `genni train`'s."""
    (field,) = [f for f in TrainConfig.fields() if f.key == "candidates"]
    parser.add_argument(
        "--candidates",
        choices=field.choices(),
        default=None,
        help=f"{field.meta['help']} ({default})",
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Settings of `genni train`: TrainConfig's defaults, then the preset
    (--preset, else the --config file's "preset", else DEFAULT_PRESET), then
    --config, then the flags given."""
    values: dict = {}
    if args.config:
        values.update(fields.read_file(args.config, "--config"))
    values.update(fields.flag_values(args, TrainConfig))
    values = fields.with_followers(TrainConfig, values)
    if getattr(args, "preset", None):
        values["preset"] = args.preset
    if getattr(args, "resume", False) and "item_tower" not in values:
        # A run resumes as the model it is, whatever the preset's rule says
        # of its dataset today.
        stored = run_item_tower(values.get("output"))
        if stored is not None:
            values["item_tower"] = stored
    return TrainConfig.from_dict(settings_with_preset(values))


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `genni pretrain`: one per setting, then how it runs."""
    fields.add_flags(
        parser,
        PretrainConfig,
        PretrainConfig.defaults() | PRETRAIN_DEFAULTS,
        required=("data", "output"),
    )
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
    values = PRETRAIN_DEFAULTS | fields.flag_values(args, PretrainConfig)
    return PretrainConfig.from_dict(fields.with_followers(PretrainConfig, values))

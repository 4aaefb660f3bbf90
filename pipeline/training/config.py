"""The settings of `genni train` and `genni pretrain`, each declared once.

`TrainConfig` holds the run's own settings, a `ModelConfig` (the encoder's,
`genni.models.config`) and a `SamplerConfig` (the sampler's,
`genni.components.samplers.config`); `PretrainConfig` holds the same
`ModelConfig`. Each value is checked by the class that owns it, and the flags
of `genni train` and `genni pretrain`, `config.json` and the run key follow
from the fields (`genni.components.settings`).

Only entry points (the CLI, benchmarks, the tuner) build a `TrainConfig` or
`PretrainConfig`; the training functions take it as one explicit, typed argument.
"""

from __future__ import annotations

import dataclasses
import os

from genni.components import schema
from genni.components.samplers import registry
from genni.components.samplers.config import SamplerConfig
from genni.components.settings import (
    NON_NEGATIVE,
    POSITIVE,
    Settings,
    at_least,
    nested,
    setting,
    within,
)
from genni.models.config import (
    PAPER_ENCODER,
    RECOMMENDED_ENCODER,
    EncoderConfig,
    ModelConfig,
)
from genni.pipeline.training import rundir

# The recommended preset's cap on the items one GenNi draw scores
# (`max_candidates`), and its budget of scores per training step for the
# draws (`draw_budget`): a step of P positions scores at most that many, so M
# is cut to the largest power of two within budget / P
# (`genni.components.samplers.budget`). Batches of 256 users hold at most
# 256 x 50 positions: M is 16,384 up to 32 training positions a user, 8,192
# beyond; Beauty's and Toys' catalogs are scored whole. What that costs and
# gives at 10^6 items: docs/scale.md.
DEFAULT_MAX_CANDIDATES = 1 << 14
DEFAULT_DRAW_BUDGET = 1 << 27
# The recommended preset's floor of optimizer steps before early stopping may
# end a run: 1,000 steps are 12 epochs of Beauty (22,363 users in batches of
# 256; its runs peak after 20 or more), 250 of MovieLens 100K's 943 users
# (runs peak between epochs 60 and 190) and more than 200 of a 150-user log.
# Without it, `max(10, best / 2)` stopped a 40-user run at epoch 11 with
# nothing learned and a 150-user one at 42% of its curve's best
# (benchmarks/results/patience.md, docs/training.md#early-stopping).
DEFAULT_MIN_STEPS = 1000
# The recommended preset's learning-rate half-life, in optimizer steps: 1e-3
# halved every 2,000 steps, chosen on validation (Beauty, 4 seeds; Toys;
# MovieLens 100K, both splits): docs/encoders.md, "A learning rate that
# halves by optimizer steps". By steps, not epochs: a small log's few hundred
# steps keep about the rate. The paper's preset keeps a constant rate.
DEFAULT_LR_HALF_LIFE = 2000


# The registered samplers (`genni.components.samplers.registry`).
SAMPLERS = registry.names()
# Which items a ranking holds (`genni.components.metrics.CANDIDATES`; kept here so
# that `--help` needs no TensorFlow).
CANDIDATES = ("new", "all")
LOSSES = ("bce", "bpr", "softmax", "sampled_softmax")
# Step of the self-adjusted alpha that the report grid and the tuner use (the
# paper gives none). Toys, alpha from 0, packed, seed 0: with 0.001 alpha was
# 0.02 after 14 epochs and stayed near its start (consecutive batch losses
# differ mostly by noise, so up and down steps nearly cancel); with 0.01 it
# was 0.38 after 12; with 0.05 it reached about 1 by epoch 7, then moved
# between 0.6 and 1.
DEFAULT_ALPHA_STEP = 0.05


def refuse_output_in_data(output: str, data: str) -> None:
    """A run directory that is, or is inside, its dataset would write into it
    (checked when a run starts, not when a recorded one is read)."""
    if not output or not data:
        return
    out, data_dir = os.path.realpath(output), os.path.realpath(data)
    if out == data_dir or out.startswith(data_dir.rstrip(os.sep) + os.sep):
        raise ValueError(
            f"--output {output!r} is, or is inside, --data {data!r}: a run "
            "writes its own directory; choose one outside the dataset."
        )


@dataclasses.dataclass(frozen=True)
class TrainConfig(Settings):
    """Settings of one training run (defaults: the paper's SASRec_GenNi).

    Each setting has one owner: the encoder's are `model` (a `ModelConfig`),
    the negative sampler's `sampler` (a `SamplerConfig`), and the run's own
    (loss, length, early stopping, batches, evaluation) are here. In the flat
    form (`config.json`, `--config`, the pipeline's YAML, presets) they share
    one namespace: `TrainConfig.of(data=D, output=O, alpha=1.0, loss="bpr")`.
    """

    KIND = "training settings"

    data: str = setting(help="Output of `genni preprocess`.")
    output: str = setting(help="Run directory to write.")
    model: ModelConfig = nested(ModelConfig)
    sampler: SamplerConfig = nested(SamplerConfig)
    loss: str = setting(
        "bce",
        "Loss. sampled_softmax: cross-entropy over the positive and its k "
        "negatives, corrected by each negative's draw probability (log Q).",
        choices=LOSSES,
    )
    logq_correction: bool = setting(
        True,
        "sampled_softmax without the log Q correction (for ablations).",
        flag="--no-logq-correction",
    )
    epochs: int = setting(200, "Most epochs.", check=at_least(1))
    patience: int = setting(
        40,
        "Epochs without a better valid NDCG@10 before stopping, at least.",
        check=at_least(1),
    )
    patience_growth: float = setting(
        0.0,
        "Epochs of patience per epoch up to the best so far: training stops "
        "after max(--patience, this x best epoch) epochs without a better one, "
        "so that a run that took long to get where it is waits as long again "
        "(0: a fixed patience; docs/training.md#early-stopping).",
        check=NON_NEGATIVE,
    )
    min_steps: int | None = setting(
        None,
        "Never stop early before S optimizer steps: a floor that binds only "
        "where an epoch is a few steps (a log of a few thousand users), whose "
        "validation curve can sit on a plateau for tens of epochs before it "
        "rises. A --warm-start run has none: its weights have trained "
        "already (docs/training.md#early-stopping).",
        check=at_least(1),
        metavar="S",
        off=0,
    )
    eval_every: int = setting(1, "Validate every E epochs.", check=at_least(1))
    validation: bool = setting(
        True,
        "Train exactly --epochs epochs with no validation or test: the last "
        "epoch's weights are the run's (a refit on every event of a dataset "
        "preprocessed with --test-days 0, `genni pipeline`'s `export: {refit: "
        "true}`).",
        flag="--no-validation",
    )
    batch_size: int = setting(256, "Users per training batch.", check=at_least(1))
    learning_rate: float = setting(1e-3, "Adam's learning rate.", check=POSITIVE)
    lr_half_life: int | None = setting(
        None,
        "Halve the learning rate every S optimizer steps (exponential decay "
        "by steps, not epochs: a log of a few thousand users, whose run is a "
        "few hundred steps, keeps about its rate; a large log's falls as it "
        "trains).",
        check=at_least(1),
        metavar="S",
        off=0,
    )
    seed: int = setting(0, "Seed of every random stream of the run.")
    init_from: str | None = setting(
        None,
        "Start from the encoder of `genni pretrain` (same model settings).",
        metavar="PRETRAIN_DIR",
    )
    warm_start: str | None = setting(
        None,
        "Start from the best weights of an earlier `genni train` run on the "
        "same log before it grew (its dataset preprocessed with `--previous`): "
        "the item table grows to this dataset's items, the optimizer starts "
        "afresh, early stopping follows this validation window.",
        metavar="RUN",
    )
    warm_start_rows: str = setting(
        "random",
        "How --warm-start sets the rows of items RUN did not know: 'random' "
        "as a fresh run, 'mean' the mean of RUN's item rows.",
        choices=("random", "mean"),
    )
    pack: bool = setting(
        False,
        "Pack several sequences into each row of a training batch: the same "
        "model outputs and loss, a fraction of the encoder's work (faster when "
        "most sequences are much shorter than the maximum length).",
        layout=True,
    )
    candidates: str = setting(
        "new",
        "Which items are ranked: 'new' leaves out the items of the user's "
        "history (the paper's protocol: a target that repeats one is a miss); "
        "'all' ranks every item, for domains where people consume the same "
        "item again (groceries, music, restaurants).",
        choices=CANDIDATES,
    )

    def validate(self) -> None:
        if self.init_from and self.warm_start:
            raise ValueError(
                "--init-from (a pre-training) and --warm-start (a run): choose one."
            )

    @property
    def step_floor(self) -> int | None:
        """The steps before which this run never stops early: `min_steps`
        for a run from fresh (or pre-trained) weights; none for a
        warm-started one, whose weights come from a run that has trained
        already: it is judged by its own curve, its patience alone
        (docs/training.md#early-stopping)."""
        return None if self.warm_start else self.min_steps

    def encoder(self, info) -> EncoderConfig:
        """The run's encoder on the dataset `info` (a `DatasetInfo`) describes."""
        return self.model.for_dataset(info, self.seed)

    def sampler_at(
        self,
        epoch: int = 0,
        num_items: int | None = None,
        positions: float | None = None,
    ) -> SamplerConfig:
        """The run's sampler at `epoch` (0-based; beta follows its schedule)
        on `num_items` items, steps of `positions` positions
        (`SamplerConfig.for_catalog`)."""
        return self.sampler.for_catalog(num_items, positions, epoch)

    @property
    def sampler_seed(self) -> int:
        """The seed of the run's training sampler (its own random stream)."""
        return registry.sampler_seed(self.seed, 1)


# When a run stops (`patience_limit`): a preset sets them, a search or a
# grid overrides them with its own budget.
STOPPING_SETTINGS = ("patience", "patience_growth", "min_steps")

# Named settings for `genni train --preset NAME` and the `preset:` of `genni
# pipeline`'s train section, over TrainConfig's defaults (a --config file and
# flags given on the command line win over a preset). TrainConfig's own
# defaults are the paper's; `genni train` starts from DEFAULT_PRESET.
PRESETS: dict[str, dict] = {
    # GenNi's negatives under a sampled softmax with the log Q correction
    # (issue 31): k = 64, alpha 1 (GenNi's Q is then the model's own softmax).
    # Its quality and step cost against the paper preset's:
    # docs/reproduction.md#beyond-the-paper. GenNi scores at most 16,384
    # items per draw (`DEFAULT_MAX_CANDIDATES`; all of Beauty's and Toys'), and
    # fewer on long histories (`DEFAULT_DRAW_BUDGET`), so that its cost stops
    # growing with the catalog and the histories. It stops after max(10, half
    # the best epoch) epochs without a better validation NDCG@10, not the
    # paper's fixed 40: its curve flattens soon after its best on large logs
    # but climbs slowly on small ones; benchmarks/patience.py replays the
    # recorded curves (docs/training.md#early-stopping). A fresh run never
    # stops before 1,000 optimizer steps: a small log's curve can sit flat for
    # tens of epochs, then rise
    # (docs/encoders.md#a-stopping-rule-that-holds-on-small-logs);
    # a warm-started one is judged by its own curve (`step_floor`).
    # Its encoder is FilterMix, chosen on validation (docs/encoders.md).
    "recommended": dict(
        loss="sampled_softmax",
        num_negatives=64,
        alpha=1.0,
        max_candidates=DEFAULT_MAX_CANDIDATES,
        draw_budget=DEFAULT_DRAW_BUDGET,
        patience=10,
        patience_growth=0.5,
        min_steps=DEFAULT_MIN_STEPS,
        encoder=RECOMMENDED_ENCODER,
        lr_half_life=DEFAULT_LR_HALF_LIFE,
    ),
    # The paper's SASRec_GenNi: SASRec, BCE with one GenNi negative, alpha 2.5.
    "paper": dict(loss="bce", num_negatives=1, alpha=2.5, encoder=PAPER_ENCODER),
}
DEFAULT_PRESET = "recommended"


def preset(name: str) -> dict:
    """The settings of preset `name`; ValueError naming the presets if unknown."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}: choose one of {sorted(PRESETS)}.")
    return dict(PRESETS[name])


# Presets that know items by their attributes (`item_tower`) where the
# dataset has them (`genni preprocess --item-attributes`) unless told: ahead
# of the ID rows alone on validation on Beauty, Toys and MovieLens 100K, and
# able to rank an item no training event holds (docs/cold_start.md).
TOWER_PRESETS = ("recommended",)


def settings_with_preset(values: dict, data: str | None = None) -> dict:
    """`values` over its preset: `values["preset"]` if given, else DEFAULT_PRESET.

    The rule of `genni train` and of `genni pipeline`'s train section, so a
    setting left out means the same in both. `data`: the dataset, where
    `values` does not name it (the pipeline sets it per step).
    """
    values = dict(values)
    name = values.pop("preset", None) or DEFAULT_PRESET
    settings = preset(name) | values
    if name in TOWER_PRESETS and "item_tower" not in settings:
        settings["item_tower"] = default_item_tower(
            settings.get("data", data), settings.get("warm_start")
        )
    return settings


def default_item_tower(data: str | None, warm_start: str | None = None) -> bool:
    """A tower preset's `item_tower`: a warm start's run's own (its weights
    fit no other model); else whether `data` has item attributes."""
    if warm_start:
        return bool(run_item_tower(warm_start))  # Missing: the warm start says.
    return bool(data) and os.path.exists(
        os.path.join(data, schema.ITEM_ATTRIBUTES_FILE)
    )


def run_item_tower(run: str | None) -> bool | None:
    """Whether the run in `run` knows items by their attributes (a stored
    run without the setting: no); None where there is no run."""
    path = os.path.join(run or "", rundir.CONFIG_FILE)
    if not run or not os.path.exists(path):
        return None
    return rundir.read_json(path).get("item_tower", False) is True


# How `genni train` runs (not a setting of the run): tf.distribute strategies.
STRATEGIES = ("default", "mirrored", "multi_worker")

PRETRAIN_SAMPLERS = ("uniform", "genni")


@dataclasses.dataclass(frozen=True)
class PretrainConfig(Settings):
    """Settings of one S3-Rec pre-training run (defaults: the S3-Rec code's).

    Its `model` must equal that of the `genni train` run that fine-tunes from
    it (the settings that shape the weights). Four objectives, weighed; the
    masked items' negatives come from `sampler` (uniform or genni, with
    `alpha`).
    """

    KIND = "pre-training settings"

    data: str = setting(help="Output of `genni preprocess` with item attributes.")
    output: str = setting(help="Pre-training directory.")
    epochs: int = setting(100, "Most epochs.", check=at_least(1))
    batch_size: int = setting(256, "Sequences per batch.", check=at_least(1))
    learning_rate: float = setting(1e-3, "Adam's learning rate.", check=POSITIVE)
    mask_probability: float = setting(
        0.2,
        "Items hidden for MIP/MAP.",
        check=within(0.0, 1.0, low_open=True, high_open=True),
    )
    aap_weight: float = setting(
        0.2, "Weight of associated attribute prediction.", check=NON_NEGATIVE
    )
    mip_weight: float = setting(
        1.0, "Weight of masked item prediction.", check=NON_NEGATIVE
    )
    map_weight: float = setting(
        1.0, "Weight of masked attribute prediction.", check=NON_NEGATIVE
    )
    sp_weight: float = setting(0.5, "Weight of segment prediction.", check=NON_NEGATIVE)
    sampler: str = setting(
        "uniform", "Negatives of masked item prediction.", choices=PRETRAIN_SAMPLERS
    )
    alpha: float = setting(2.5, "GenNi alpha for --sampler genni.", check=NON_NEGATIVE)
    num_negatives: int = setting(1, "k for MIP.", check=at_least(1))
    model: ModelConfig = nested(ModelConfig)
    seed: int = setting(0, "Seed of every random stream of the run.")

    def validate(self) -> None:
        if self.model.item_tower:
            raise ValueError(
                "--item-tower is a setting of `genni train`: pre-training "
                "learns the encoder and the ID rows; a run with --item-tower "
                "--init-from it starts its attribute rows afresh."
            )

    def encoder(self, info) -> EncoderConfig:
        """The encoder being pre-trained, on the dataset `info` describes."""
        return self.model.for_dataset(info, self.seed)

    def sampler_config(self) -> SamplerConfig:
        """The sampler of the MIP negatives: as the S3-Rec code, a uniform
        draw never takes the sequence's items; GenNi's draw may."""
        generated = self.sampler in registry.model_generated()
        return SamplerConfig(
            name=self.sampler,
            num_negatives=self.num_negatives,
            alpha=self.alpha,
            exclude_seen=not generated,
        )

    @property
    def sampler_seed(self) -> int:
        return registry.sampler_seed(self.seed, 2)

    @property
    def weights(self) -> dict[str, float]:
        return {
            "aap": self.aap_weight,
            "mip": self.mip_weight,
            "map": self.map_weight,
            "sp": self.sp_weight,
        }


ORACLES = ("random", "bayesian", "hyperband")  # keras-tuner's.


@dataclasses.dataclass(frozen=True)
class TuneConfig(Settings):
    """Settings of one search (`genni tune`, the pipeline's `tune:`)."""

    KIND = "tune settings"

    oracle: str = setting("random", "keras-tuner's oracle.", choices=ORACLES)
    max_trials: int = setting(12, "Trials of the search.", check=at_least(1))
    epochs_per_trial: int = setting(30, "Most epochs a trial.", check=at_least(1))
    patience: int = setting(
        10,
        "A trial stops after this many epochs without a better one.",
        check=at_least(1),
    )
    space: str | None = setting(None, "JSON/YAML file replacing space entries.")
    seed: int = setting(0, "Seed of the oracle and of every trial.")
    pack: bool = setting(False, "Train the trials on packed batches.")
    candidates: str = setting(
        "new", "The ranking rule of every trial's validation.", choices=CANDIDATES
    )

"""The validated settings of `genni train` and `genni pretrain`.

Only entry points (the CLI, benchmarks, the tuner) build a `TrainConfig` or
`PretrainConfig`; the training functions take it as one explicit, typed argument.
"""

from __future__ import annotations

import dataclasses

from genni.components.samplers import budget, registry
from genni.components.samplers.budget import (
    DEFAULT_CLUSTER_REFRESH,
    DEFAULT_CLUSTER_SAMPLES,
)
from genni.components.samplers.registry import SamplerConfig
from genni.models.config import SASRecConfig

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


class _Settings:
    """to_dict / from_dict of a settings dataclass; unknown names are an error."""

    KIND = "settings"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def defaults(cls) -> dict:
        """Each setting's default (settings without one are left out)."""
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }

    @classmethod
    def from_dict(cls, values: dict):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.KIND}: {', '.join(unknown)}.")
        return cls(**values)

    def _check_choice(self, name: str, choices: tuple) -> None:
        value = getattr(self, name)
        if value not in choices:
            raise ValueError(f"`{name}` must be one of {choices}. Got {value!r}.")

    def _check(self, names: tuple[str, ...], test, requirement: str) -> None:
        """Each named setting that is set (not None) must pass `test`."""
        for name in names:
            value = getattr(self, name)
            if value is not None and not test(value):
                raise ValueError(f"`{name}` must be {requirement}. Got {value}.")

    def _at_least_one(self, *names: str) -> None:
        self._check(names, lambda v: v >= 1, "at least 1")

    def _non_negative(self, *names: str) -> None:
        self._check(names, lambda v: v >= 0, "non-negative")

    def _positive(self, *names: str) -> None:
        self._check(names, lambda v: v > 0, "positive")


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


@dataclasses.dataclass(frozen=True)
class TrainConfig(_Settings):
    """Settings of one training run (defaults: the paper's SASRec_GenNi).

    Model: `hidden_size`, `num_layers`, `num_heads`, `dropout`,
    `attention_dropout`. Sampler: `sampler`, `num_negatives` (k), `alpha`,
    `beta`, `beta_growth` (m of the growing schedule; None keeps beta fixed),
    `beta_group` (positions sharing one V' of GenNi; None: the whole batch),
    `alpha_step` (self-adjusted alpha; None keeps it fixed), `gamma`
    (popularity exponent), `exclude_seen` (the sampler never draws the
    user's items), `max_logits` (GenNi memory bound), `max_candidates` (most
    items one GenNi draw scores: beta's share of a larger catalog is cut to it,
    so a draw costs the same at 10^6 items as at this many; None: no cap),
    `draw_budget` (most scores a step's GenNi draws compute, positions x
    candidates: cuts `max_candidates` further on long histories; None: no
    budget), `clusters` (C: GenNi's two-level draw over C k-means clusters
    of the items instead of a uniform subset; None: off), `cluster_samples`
    (R, candidates per row it resamples from), `cluster_refresh` (steps
    between k-means refreshes), `successors` (S: beside a capped V', each
    position also scores the S items that most often followed its input item
    in the training data; None: off). Training: `loss`
    (`sampled_softmax`: cross-entropy over the positive and its k negatives,
    with `logq_correction` subtracting log(k Q) of each draw; see
    `genni.components.losses.sampled_softmax_loss`),
    `epochs`, `patience` (epochs without a better valid NDCG@10 before
    stopping), `patience_growth` (each epoch up to the best so far adds this
    many to the patience: training stops after max(patience, patience_growth
    x best epoch) epochs without a better one, so a run that took long to get
    where it is waits as long again; 0: a fixed patience),
    `eval_every`, `batch_size`, `learning_rate`, `seed`, `pack` (several
    sequences per row of a training batch: the same outputs and loss, a
    fraction of the encoder's work; see `genni.components.packing`). `init_from`: a
    `genni pretrain` directory whose encoder weights start the run.
    `candidates`: which items evaluation ranks, and `genni export` serves by
    default: "new" leaves out the items of the user's history (the paper's
    protocol), "all" ranks every item (`genni.components.metrics`).
    """

    KIND = "training settings"

    data: str
    output: str
    sampler: str = "genni"
    num_negatives: int = 1
    alpha: float = 2.5
    beta: float = 1.0
    beta_growth: float | None = None
    beta_group: int | None = None
    alpha_step: float | None = None
    gamma: float = 1.0
    exclude_seen: bool = False
    max_logits: int = 1 << 24
    max_candidates: int | None = None
    draw_budget: int | None = None
    clusters: int | None = None
    cluster_samples: int = DEFAULT_CLUSTER_SAMPLES
    cluster_refresh: int = DEFAULT_CLUSTER_REFRESH
    successors: int | None = None
    loss: str = "bce"
    logq_correction: bool = True
    epochs: int = 200
    patience: int = 40
    patience_growth: float = 0.0
    eval_every: int = 1
    batch_size: int = 256
    learning_rate: float = 1e-3
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    dropout: float = 0.5
    attention_dropout: float = 0.5
    seed: int = 0
    init_from: str | None = None
    pack: bool = False
    candidates: str = "new"

    def __post_init__(self) -> None:
        self._check_choice("sampler", SAMPLERS)
        self._check_choice("candidates", CANDIDATES)
        self._check_choice("loss", LOSSES)
        self._at_least_one(
            "num_negatives", "epochs", "patience", "eval_every", "batch_size"
        )
        self._non_negative("alpha", "patience_growth")
        if not 0.0 < self.beta <= 1.0:
            raise ValueError(f"`beta` must be in (0, 1]. Got {self.beta}.")
        self._positive(
            "beta_growth",
            "alpha_step",
            "learning_rate",
            "beta_group",
            "max_candidates",
            "draw_budget",
            "successors",
        )
        self._at_least_one("cluster_samples", "cluster_refresh")
        if self.clusters is not None and self.clusters < 2:
            raise ValueError(f"`clusters` must be at least 2. Got {self.clusters}.")
        if self.clusters is not None and self.successors is not None:
            raise ValueError(
                "--clusters and --successors are two different GenNi draws: choose one."
            )
        generated = registry.model_generated()
        if self.sampler not in generated and (
            self.alpha_step
            or self.beta_growth
            or self.beta_group
            or self.clusters
            or self.successors
        ):
            raise ValueError(
                "--self-adjust-alpha, --beta-schedule, --beta-group, "
                f"--clusters and --successors need --sampler {' or '.join(generated)}."
            )

    def model(self, info) -> SASRecConfig:
        """The run's encoder on the dataset `info` (a `DatasetInfo`) describes."""
        return SASRecConfig.for_dataset(info, self)

    def sampler_config(
        self,
        epoch: int = 0,
        num_items: int | None = None,
        positions: float | None = None,
    ) -> SamplerConfig:
        """The run's sampler at `epoch` (0-based; beta follows its schedule).

        With `num_items` (the catalog), k is at most num_items - 1: the
        recommended preset's 64 negatives on a catalog of 40 items draw 39.
        With `num_items` and `positions` (a training step's mean number of
        target positions), `draw_budget` sets the candidates
        (`draw_candidates`).
        """
        from genni.components.schedules import beta_for_epoch

        k = self.num_negatives
        if num_items is not None:
            k = max(1, min(k, num_items - 1))
        return SamplerConfig(
            name=self.sampler,
            num_negatives=k,
            alpha=self.alpha,
            beta=beta_for_epoch(epoch, self.beta, self.beta_growth),
            beta_group=self.beta_group,
            max_logits=self.max_logits,
            max_candidates=self.draw_candidates(num_items, positions),
            clusters=(
                self.clusters
                if self.clusters is None or num_items is None
                else min(self.clusters, num_items)
            ),
            cluster_samples=self.cluster_samples,
            cluster_refresh=self.cluster_refresh,
            successors=self.successors,
            gamma=self.gamma,
            seed=registry.sampler_seed(self.seed, 1),
        )

    def scored_candidates(self, num_items: int, positions: float) -> int:
        """The items the run's GenNi draw scores at its first epoch, on a
        catalog of `num_items` and steps of `positions` positions (the
        sampler's own rule, `scored_candidates`)."""
        sampler = self.sampler_config(num_items=num_items, positions=positions)
        return budget.scored_candidates(
            num_items, sampler.beta, sampler.max_candidates, sampler.num_negatives
        )

    def draw_candidates(
        self, num_items: int | None = None, positions: float | None = None
    ) -> int | None:
        """Most items one GenNi draw scores: `max_candidates`, cut by
        `draw_budget` to fit a step of `positions` positions over `num_items`
        items (`budget_candidates`); None scores beta's whole share."""
        if self.draw_budget is None or num_items is None or positions is None:
            return self.max_candidates
        return budget.budget_candidates(
            self.draw_budget,
            positions,
            num_items,
            cap=self.max_candidates,
            minimum=min(self.num_negatives + 1, num_items),
        )


# When a run stops (`patience_limit`): a preset sets them, a search or a
# grid overrides them with its own budget.
STOPPING_SETTINGS = ("patience", "patience_growth")

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
    # (35k users: best epoch 24, then 40 wasted epochs), but climbs slowly for
    # 200 epochs on small ones (ml-100k). benchmarks/patience.py replays the
    # recorded curves (docs/training.md#early-stopping).
    "recommended": dict(
        loss="sampled_softmax",
        num_negatives=64,
        alpha=1.0,
        max_candidates=DEFAULT_MAX_CANDIDATES,
        draw_budget=DEFAULT_DRAW_BUDGET,
        patience=10,
        patience_growth=0.5,
    ),
    # The paper's SASRec_GenNi: BCE with one GenNi negative, alpha 2.5.
    "paper": dict(loss="bce", num_negatives=1, alpha=2.5),
}
DEFAULT_PRESET = "recommended"


def preset(name: str) -> dict:
    """The settings of preset `name`; ValueError naming the presets if unknown."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}: choose one of {sorted(PRESETS)}.")
    return dict(PRESETS[name])


def settings_with_preset(values: dict) -> dict:
    """`values` over its preset: `values["preset"]` if given, else DEFAULT_PRESET.

    The rule of `genni train` and of `genni pipeline`'s train section, so a
    setting left out means the same in both.
    """
    values = dict(values)
    name = values.pop("preset", None) or DEFAULT_PRESET
    return preset(name) | values


# How `genni train` runs (not a setting of the run): tf.distribute strategies.
STRATEGIES = ("default", "mirrored", "multi_worker")

PRETRAIN_SAMPLERS = ("uniform", "genni")


@dataclasses.dataclass(frozen=True)
class PretrainConfig(_Settings):
    """Settings of one S3-Rec pre-training run (defaults: the S3-Rec code's).

    Model settings must equal those of the `genni train` run that fine-tunes
    from it. `aap_weight`, `mip_weight`, `map_weight`, `sp_weight` weigh the
    four objectives; `mask_probability` hides items for MIP and MAP;
    `sampler` (uniform or genni, with `alpha`) draws the MIP negatives.
    """

    KIND = "pre-training settings"

    data: str
    output: str
    epochs: int = 100
    batch_size: int = 256
    learning_rate: float = 1e-3
    mask_probability: float = 0.2
    aap_weight: float = 0.2
    mip_weight: float = 1.0
    map_weight: float = 1.0
    sp_weight: float = 0.5
    sampler: str = "uniform"
    alpha: float = 2.5
    num_negatives: int = 1
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    dropout: float = 0.5
    attention_dropout: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        self._check_choice("sampler", PRETRAIN_SAMPLERS)
        self._at_least_one("epochs", "batch_size", "num_negatives")
        if not 0.0 < self.mask_probability < 1.0:
            raise ValueError(
                f"`mask_probability` must be in (0, 1). Got {self.mask_probability}."
            )
        self._non_negative(
            "aap_weight", "mip_weight", "map_weight", "sp_weight", "alpha"
        )
        self._positive("learning_rate")

    def model(self, info) -> SASRecConfig:
        """The encoder being pre-trained, on the dataset `info` describes."""
        return SASRecConfig.for_dataset(info, self)

    def sampler_config(self) -> SamplerConfig:
        """The sampler of the MIP negatives."""
        return SamplerConfig(
            name=self.sampler,
            num_negatives=self.num_negatives,
            alpha=self.alpha,
            seed=registry.sampler_seed(self.seed, 2),
        )

    @property
    def weights(self) -> dict[str, float]:
        return {
            "aap": self.aap_weight,
            "mip": self.mip_weight,
            "map": self.map_weight,
            "sp": self.sp_weight,
        }

"""The one registry of negative samplers: names, settings and builders.

Every caller (training, pre-training, tuning, the CLI's choices) asks this
module what a sampler name means instead of branching on the name:

    sampler = build_sampler(SamplerConfig("genni", num_negatives=1), num_items)
    if registry.get(name).model_generated: ...  # alpha, beta and their schedules

The module needs no TensorFlow until a sampler is built, so `--help` and
settings checks stay light. A new sampler is one `register` call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from genni.components.samplers.budget import (
    DEFAULT_CLUSTER_REFRESH,
    DEFAULT_CLUSTER_SAMPLES,
)


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    """Settings of one sampler (each sampler reads the ones it has).

    `name`: a registered sampler. `num_negatives`: k per position. GenNi:
    `alpha` (softmax temperature), `beta` (share of the catalog scored per
    draw), `beta_group` (positions sharing one candidate subset; None: the
    whole batch), `max_logits` (memory bound; None: the sampler's default),
    `max_candidates` (most items scored per draw; None: beta's share, uncapped),
    `clusters` (C of the two-level draw over item clusters; None: off),
    `cluster_samples` (its R candidates per row), `cluster_refresh` (draws
    between its k-means refreshes), `successors` (S: each position also
    scores the S items that most often followed its input item; None: off).
    Popularity: `gamma` (exponent of the counts). `seed`: the sampler's own
    random stream.
    """

    name: str = "genni"
    num_negatives: int = 1
    alpha: float = 2.5
    beta: float = 1.0
    beta_group: int | None = None
    max_logits: int | None = None
    max_candidates: int | None = None
    clusters: int | None = None
    cluster_samples: int = DEFAULT_CLUSTER_SAMPLES
    cluster_refresh: int = DEFAULT_CLUSTER_REFRESH
    successors: int | None = None
    gamma: float = 1.0
    seed: int | None = None


@dataclasses.dataclass(frozen=True)
class SamplerKind:
    """What a sampler name means.

    `build(config, num_items, item_counts)` makes the layer.
    `needs_item_counts`: it draws from the training items' counts.
    `model_generated`: its negatives come from the model's own scores, so the
    GenNi knobs apply (alpha and its self-adjustment, beta and its schedule,
    beta groups).
    """

    build: Callable
    needs_item_counts: bool = False
    model_generated: bool = False


_REGISTRY: dict[str, SamplerKind] = {}


def register(name: str, kind: SamplerKind) -> None:
    """Add a sampler under `name` (an existing name is an error)."""
    if name in _REGISTRY:
        raise ValueError(f"A sampler named {name!r} is already registered.")
    _REGISTRY[name] = kind


def names() -> tuple[str, ...]:
    """The registered sampler names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> SamplerKind:
    """The sampler registered as `name`; a clear error for any other name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"Unknown sampler {name!r}; expected one of {names()}."
        ) from None


def model_generated() -> tuple[str, ...]:
    """Names of the samplers whose negatives the model generates (GenNi's)."""
    return tuple(n for n, kind in _REGISTRY.items() if kind.model_generated)


def build_sampler(
    config: SamplerConfig,
    num_items: int,
    item_counts: Sequence[float] | None = None,
):
    """The sampler layer `config` describes, over items 1..`num_items`.

    `item_counts` ([num_items + 1] counts) is needed by samplers that draw by
    popularity, and ignored by the others.
    """
    kind = get(config.name)
    if kind.needs_item_counts and item_counts is None:
        raise ValueError(f"The {config.name} sampler needs item counts.")
    return kind.build(config, num_items, item_counts)


def sampler_seed(run_seed: int, stream: int = 1) -> int:
    """The seed of a run's sampler: one stream per use (1: training, 2:
    pre-training), apart from the run's other random streams."""
    return run_seed * 7919 + stream


def _uniform(config: SamplerConfig, num_items: int, item_counts):
    from genni.components.samplers.uniform import UniformSampler

    return UniformSampler(num_items, config.num_negatives, seed=config.seed)


def _popularity(config: SamplerConfig, num_items: int, item_counts):
    from genni.components.samplers.popularity import PopularitySampler

    counts = item_counts.tolist() if hasattr(item_counts, "tolist") else item_counts
    return PopularitySampler(
        num_items, counts, config.gamma, config.num_negatives, seed=config.seed
    )


def _genni(config: SamplerConfig, num_items: int, item_counts):
    from genni.components.samplers.genni import GenNiSampler

    bound = {} if config.max_logits is None else {"max_logits": config.max_logits}
    return GenNiSampler(
        num_items,
        config.num_negatives,
        alpha=config.alpha,
        beta=config.beta,
        beta_group=config.beta_group,
        seed=config.seed,
        max_candidates=config.max_candidates,
        clusters=config.clusters,
        cluster_samples=config.cluster_samples,
        cluster_refresh=config.cluster_refresh,
        successors=config.successors,
        **bound,
    )


register("uniform", SamplerKind(_uniform))
register("popularity", SamplerKind(_popularity, needs_item_counts=True))
register("genni", SamplerKind(_genni, model_generated=True))

"""The one registry of negative samplers: names, settings and builders.

Every caller (training, pre-training, tuning, the CLI's choices) asks this
module what a sampler name means instead of branching on the name:

    sampler = build_sampler(SamplerConfig(name="genni"), num_items, seed)
    sampler.setup(dataset)  # What it needs from the training data.
    if registry.get(name).model_generated: ...  # alpha, beta and their schedules

The module needs no TensorFlow until a sampler is built, so `--help` and
settings checks stay light. A new sampler is one `register` call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from genni.components.samplers.config import SamplerConfig


@dataclasses.dataclass(frozen=True)
class SamplerKind:
    """What a sampler name means.

    `build(config, num_items, seed)` makes the layer (its `setup` then reads
    what it needs of the training data). `model_generated`: its negatives
    come from the model's own scores, so the GenNi knobs apply (alpha and its
    self-adjustment, beta and its schedule, beta groups).
    """

    build: Callable
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


def build_sampler(config: SamplerConfig, num_items: int, seed: int | None = None):
    """The sampler layer `config` describes, over items 1..`num_items`, with
    its own random stream `seed` (`sampler_seed`). Call its `setup(data)`
    before it draws."""
    return get(config.name).build(config, num_items, seed)


def sampler_seed(run_seed: int, stream: int = 1) -> int:
    """The seed of a run's sampler: one stream per use (1: training, 2:
    pre-training), apart from the run's other random streams."""
    return run_seed * 7919 + stream


def _uniform(config: SamplerConfig, num_items: int, seed: int | None):
    from genni.components.samplers.uniform import UniformSampler

    return UniformSampler(
        num_items, config.num_negatives, seed=seed, exclude_seen=config.exclude_seen
    )


def _popularity(config: SamplerConfig, num_items: int, seed: int | None):
    from genni.components.samplers.popularity import PopularitySampler

    return PopularitySampler(
        num_items,
        gamma=config.gamma,
        num_negatives=config.num_negatives,
        seed=seed,
        exclude_seen=config.exclude_seen,
    )


def _genni(config: SamplerConfig, num_items: int, seed: int | None):
    from genni.components.samplers.genni import GenNiSampler

    return GenNiSampler(
        num_items,
        config.num_negatives,
        alpha=config.alpha,
        beta=config.beta,
        beta_group=config.beta_group,
        seed=seed,
        max_logits=config.max_logits,
        max_candidates=config.max_candidates,
        clusters=config.clusters,
        cluster_samples=config.cluster_samples,
        cluster_refresh=config.cluster_refresh,
        successors=config.successors,
        exclude_seen=config.exclude_seen,
    )


register("uniform", SamplerKind(_uniform))
register("popularity", SamplerKind(_popularity))
register("genni", SamplerKind(_genni, model_generated=True))

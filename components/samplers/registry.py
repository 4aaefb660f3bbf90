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
from typing import TYPE_CHECKING

from genni.components.registry import Registry
from genni.components.settings import constructor_settings

if TYPE_CHECKING:
    from genni.components.samplers.config import SamplerConfig


@dataclasses.dataclass(frozen=True)
class SamplerKind:
    """What a sampler name means.

    `layer`: "module:Class" of its layer, imported on first build (so that
    names and settings need no TensorFlow). The layer takes, by name, the
    `SamplerConfig` settings its constructor has (`build_sampler`), so a new
    setting reaches it without a line here. `model_generated`: its negatives
    come from the model's own scores, so the GenNi knobs apply (alpha and its
    self-adjustment, beta and its schedule, beta groups).
    """

    layer: str
    model_generated: bool = False


_SAMPLERS = Registry("sampler")
# register(name, SamplerKind), names(), get(name) -> SamplerKind, and
# layer_class(name) (imports TensorFlow).
register = _SAMPLERS.register
names = _SAMPLERS.names
get = _SAMPLERS.get
layer_class = _SAMPLERS.layer_class


def model_generated() -> tuple[str, ...]:
    """Names of the samplers whose negatives the model generates (GenNi's)."""
    return _SAMPLERS.having("model_generated")


def build_sampler(config: SamplerConfig, num_items: int, seed: int | None = None):
    """The sampler layer `config` describes, over items 1..`num_items`, with
    its own random stream `seed` (`sampler_seed`): the layer gets each
    setting its constructor names. Call its `setup(data)` before it draws."""
    cls = layer_class(config.name)
    settings = constructor_settings(cls, config, up_to="NegativeSampler")
    return cls(num_items, seed=seed, **settings)


def sampler_seed(run_seed: int, stream: int = 1) -> int:
    """The seed of a run's sampler: one stream per use (1: training, 2:
    pre-training), apart from the run's other random streams."""
    return run_seed * 7919 + stream


_PACKAGE = "genni.components.samplers"
register("uniform", SamplerKind(f"{_PACKAGE}.uniform:UniformSampler"))
register("popularity", SamplerKind(f"{_PACKAGE}.popularity:PopularitySampler"))
register("genni", SamplerKind(f"{_PACKAGE}.genni:GenNiSampler", model_generated=True))

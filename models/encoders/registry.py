"""The one registry of sequence encoders: names, settings and builders.

    encoder = registry.build_encoder(EncoderConfig(encoder="filtermix", ...))
    registry.get(name).pretrainable  # S3-Rec pre-training applies

Names and settings need no TensorFlow (`--help`, settings checks); the layer
class is imported when an encoder is built. A new encoder is one module under
`genni.models.encoders`, one `register` call, and its settings in
`genni.models.config.ModelConfig` (listed in its `own_settings`).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING

from genni.components.settings import constructor_settings

if TYPE_CHECKING:
    from genni.models.config import EncoderConfig


@dataclasses.dataclass(frozen=True)
class EncoderKind:
    """What an encoder name means.

    `layer`: "module:Class" of its layer. It takes, by name, the
    `EncoderConfig` settings its constructor has. `own_settings`: the
    `ModelConfig` settings only this encoder reads (others leave them unread:
    a run is keyed with them at their defaults). `pretrainable`: S3-Rec
    pre-training can train it (`genni pretrain`, `--init-from`).
    """

    layer: str
    own_settings: tuple[str, ...] = ()
    pretrainable: bool = True


_REGISTRY: dict[str, EncoderKind] = {}


def register(name: str, kind: EncoderKind) -> None:
    """Add an encoder under `name` (an existing name is an error)."""
    if name in _REGISTRY:
        raise ValueError(f"An encoder named {name!r} is already registered.")
    _REGISTRY[name] = kind


def names() -> tuple[str, ...]:
    """The registered encoder names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> EncoderKind:
    """The encoder registered as `name`; a clear error for any other name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"Unknown encoder {name!r}; expected one of {names()}."
        ) from None


def pretrainable() -> tuple[str, ...]:
    """Names of the encoders S3-Rec pre-training can train."""
    return tuple(n for n, kind in _REGISTRY.items() if kind.pretrainable)


def unread_settings(name: str) -> tuple[str, ...]:
    """The encoder settings that encoder `name` does not read."""
    own = set(get(name).own_settings)
    return tuple(
        setting
        for other in names()
        for setting in get(other).own_settings
        if setting not in own
    )


def layer_class(name: str) -> type:
    """The layer class registered as `name` (imports TensorFlow)."""
    module, _, cls = get(name).layer.partition(":")
    return getattr(importlib.import_module(module), cls)


def build_encoder(config: EncoderConfig):
    """The encoder `config` describes, named after it ("sasrec", ...): the
    layer gets each setting its constructor names."""
    cls = layer_class(config.encoder)
    settings = constructor_settings(cls, config, up_to="SASRecEncoder")
    return cls(name=config.encoder, **settings)


_PACKAGE = "genni.models.encoders"
register("sasrec", EncoderKind(f"{_PACKAGE}.sasrec:SASRecEncoder"))
register(
    "filtermix",
    EncoderKind(
        f"{_PACKAGE}.filtermix:FilterMixEncoder",
        own_settings=("filter_alpha", "filter_window"),
    ),
)

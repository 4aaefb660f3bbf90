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
from typing import TYPE_CHECKING

from genni.components.registry import Registry
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


_ENCODERS = Registry("encoder")
# register(name, EncoderKind), names(), get(name) -> EncoderKind, and
# layer_class(name) (imports TensorFlow).
register = _ENCODERS.register
names = _ENCODERS.names
get = _ENCODERS.get
layer_class = _ENCODERS.layer_class


def pretrainable() -> tuple[str, ...]:
    """Names of the encoders S3-Rec pre-training can train."""
    return _ENCODERS.having("pretrainable")


def unread_settings(name: str) -> tuple[str, ...]:
    """The encoder settings that encoder `name` does not read."""
    own = set(get(name).own_settings)
    return tuple(
        setting
        for other in names()
        for setting in get(other).own_settings
        if setting not in own
    )


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

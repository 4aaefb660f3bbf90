"""SASRec's own settings and builder.

A run's settings (`genni.pipeline.training.config.TrainConfig`, or
`PretrainConfig`) hold the model's fields flat, as `genni train` flags and
`config.json` name them; their `model(info)` gives the `SASRecConfig` that
`build_encoder` turns into an encoder. Training, pre-training, evaluation and
export build their encoders here, so one set of settings always gives the
same network (and the same weight names, "sasrec/...").
"""

from __future__ import annotations

import dataclasses

from genni.components import schema

ENCODER_NAME = "sasrec"
# The settings that shape the encoder's weights: a pre-trained encoder fits a
# fine-tuning run only if these agree (dropout and seed may differ).
WEIGHT_FIELDS = ("hidden_size", "num_layers", "num_heads")


@dataclasses.dataclass(frozen=True)
class SASRecConfig:
    """The SASRec encoder: catalog size, input length, width and depth, dropout.

    Defaults: the paper's (2 blocks of 2 heads, width 64, dropout 0.5).
    """

    num_items: int
    max_len: int = schema.DEFAULT_MAX_LEN
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    dropout: float = 0.5
    attention_dropout: float = 0.5
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("num_items", "max_len", "hidden_size", "num_layers", "num_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be at least 1. Got {self}.")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_heads` ({self.num_heads})."
            )

    @classmethod
    def for_dataset(cls, info: schema.DatasetInfo, settings) -> SASRecConfig:
        """The encoder of a run's `settings` (any object with the model's
        fields, e.g. a `TrainConfig`) on the dataset `info` describes."""
        return cls(
            num_items=info.num_items,
            max_len=info.max_len,
            hidden_size=settings.hidden_size,
            num_layers=settings.num_layers,
            num_heads=settings.num_heads,
            dropout=settings.dropout,
            attention_dropout=settings.attention_dropout,
            seed=settings.seed,
        )

    def weight_differences(self, other: SASRecConfig) -> list[str]:
        """'hidden_size 64 vs 128', ... for each weight-shaping setting that
        differs (empty: `other`'s weights fit this encoder)."""
        return [
            f"{name} {getattr(self, name)} vs {getattr(other, name)}"
            for name in WEIGHT_FIELDS
            if getattr(self, name) != getattr(other, name)
        ]


def build_encoder(config: SASRecConfig):
    """The SASRec encoder of `config` (named "sasrec" in every model)."""
    from genni.models.sasrec import SASRecEncoder

    return SASRecEncoder(
        num_items=config.num_items,
        max_len=config.max_len,
        hidden_size=config.hidden_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        seed=config.seed,
        name=ENCODER_NAME,
    )

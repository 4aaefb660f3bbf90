"""SASRec's own settings and builder.

`ModelConfig` holds the encoder's settings, each declared once; a run's
settings (`genni.pipeline.training.config.TrainConfig`, and `PretrainConfig`)
hold one, and their `encoder(info)` gives the `SASRecConfig` (the settings on
a dataset's catalog and input length) that `build_encoder` turns into an
encoder. Training, pre-training, evaluation and export build their encoders
here, so one set of settings always gives the same network (and the same
weight names, "sasrec/...").
"""

from __future__ import annotations

import dataclasses

from genni.components import schema
from genni.components.settings import NON_NEGATIVE, Settings, at_least, setting

ENCODER_NAME = "sasrec"
# The settings that shape the encoder's weights: a pre-trained encoder fits a
# fine-tuning run only if these agree (dropout and seed may differ).
WEIGHT_FIELDS = ("hidden_size", "num_layers", "num_heads")


@dataclasses.dataclass(frozen=True)
class ModelConfig(Settings):
    """The encoder's settings (defaults: the paper's: 2 blocks of 2 heads,
    width 64, dropout 0.5). Those that shape its weights (`WEIGHT_FIELDS`)
    must agree between a pre-training and the run fine-tuned from it."""

    KIND = "model settings"

    hidden_size: int = setting(
        64,
        "Width of the item embeddings and blocks (a pre-training and the run "
        "fine-tuned from it must agree on it, the layers and the heads).",
        check=at_least(1),
    )
    num_layers: int = setting(2, "Self-attention blocks.", check=at_least(1))
    num_heads: int = setting(
        2, "Attention heads; they divide --hidden-size.", check=at_least(1)
    )
    dropout: float = setting(
        0.5,
        "Dropout of the embeddings and blocks, and of the attention weights "
        "unless `attention_dropout` is set apart (in a config file).",
        check=NON_NEGATIVE,
    )
    attention_dropout: float = setting(
        0.5,
        "Dropout of the attention weights.",
        check=NON_NEGATIVE,
        flag=None,
        follows="dropout",
    )

    def validate(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_heads` ({self.num_heads})."
            )

    def for_dataset(self, info: schema.DatasetInfo, seed: int | None) -> SASRecConfig:
        """The encoder of these settings on the dataset `info` describes."""
        return SASRecConfig(
            num_items=info.num_items,
            max_len=info.max_len,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            seed=seed,
        )


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

"""The encoders' settings and builder.

`ModelConfig` holds the encoder's settings, each declared once, the choice of
encoder (`--encoder`, `genni.models.encoders.registry`) among them; a run's
settings (`genni.pipeline.training.config.TrainConfig`, and `PretrainConfig`)
hold one, and their `encoder(info)` gives the `EncoderConfig` (the settings on
a dataset's catalog and input length) that `build_encoder` turns into an
encoder. Training, pre-training, evaluation and export build their encoders
here, so one set of settings always gives the same network (and the same
weight names, "sasrec/...", "filtermix/...").
"""

from __future__ import annotations

import dataclasses

from genni.components import schema
from genni.components.settings import (
    NON_NEGATIVE,
    Settings,
    at_least,
    setting,
    within,
)
from genni.models.encoders import registry

# The encoder of runs recorded before there was a choice: a `config.json`
# without "encoder" is a SASRec run, whatever today's default.
FIRST_ENCODER = "sasrec"
# The paper's (`--preset paper`).
PAPER_ENCODER = "sasrec"
# `genni train`'s (the recommended preset's) and `genni pretrain`'s, chosen on
# validation (Beauty, Toys, MovieLens 100K; docs/encoders.md). The field's own
# default stays FIRST_ENCODER, so that a stored run without the setting is
# read, keyed and resumed as what it was.
RECOMMENDED_ENCODER = "filtermix"
# The settings that shape the encoder's weights: a pre-trained encoder (or a
# warm start) fits a run only if these agree (dropout, the filter's mix and
# the seed may differ).
WEIGHT_FIELDS = ("encoder", "hidden_size", "num_layers", "num_heads", "item_tower")


@dataclasses.dataclass(frozen=True)
class ModelConfig(Settings):
    """The encoder's settings (defaults: the paper's: 2 blocks of 2 heads,
    width 64, dropout 0.5). Those that shape its weights (`WEIGHT_FIELDS`)
    must agree between a pre-training and the run fine-tuned from it."""

    KIND = "model settings"

    encoder: str = setting(
        FIRST_ENCODER,
        "Sequence encoder: 'sasrec' (causal self-attention) or 'filtermix' "
        "(SASRec's blocks with a learned causal low-pass filter mixed beside "
        "attention, after BSARec); docs/training.md#encoders.",
        choices=registry.names,
    )
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
    filter_alpha: float = setting(
        0.7,
        "FilterMix: the filter's share of each block's mix (1: filter only, "
        "0: attention only).",
        check=within(0.0, 1.0, low_open=False, high_open=False),
    )
    filter_window: int = setting(
        10,
        "FilterMix: the width, in items, of the moving average its filter starts from.",
        check=at_least(1),
    )
    # The field's default stays off, so that a stored run without the setting
    # is read as what it was; the recommended preset turns it on where the
    # dataset has item attributes (`genni.pipeline.training.config`).
    item_tower: bool = setting(
        False,
        "Know items by their attributes too (the dataset's --item-attributes): "
        "an item's vector, at the input and as a candidate, is its ID row plus "
        "the mean of its attributes' rows, and an item without a trained ID "
        "row is scored by its attributes alone (genni.models.item_tower). "
        "Default: on where the dataset has item attributes (a --warm-start: as "
        "its run), in the recommended preset; off in the paper's.",
        two_way=True,
    )
    id_dropout: float = setting(
        0.2,
        "With --item-tower: the share of items whose ID row each training step "
        "leaves out, so that their attributes learn to stand for them.",
        check=within(0.0, 1.0, low_open=False, high_open=True),
    )

    def validate(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_heads` ({self.num_heads})."
            )

    def unread(self) -> tuple[str, ...]:
        """The settings this run's encoder does not read (keyed at defaults)."""
        tower = () if self.item_tower else ("id_dropout",)
        return registry.unread_settings(self.encoder) + tower

    def for_dataset(self, info: schema.DatasetInfo, seed: int | None) -> EncoderConfig:
        """The encoder of these settings on the dataset `info` describes."""
        return EncoderConfig(
            encoder=self.encoder,
            num_items=info.num_items,
            max_len=info.max_len,
            hidden_size=self.hidden_size,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            filter_alpha=self.filter_alpha,
            filter_window=self.filter_window,
            item_tower=self.item_tower,
            seed=seed,
        )


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """An encoder on a dataset: which one, catalog size, input length, width
    and depth, dropout, and the settings of its kind (unread by others).

    Defaults: the paper's SASRec (2 blocks of 2 heads, width 64, dropout 0.5).
    """

    num_items: int
    encoder: str = FIRST_ENCODER
    max_len: int = schema.DEFAULT_MAX_LEN
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    dropout: float = 0.5
    attention_dropout: float = 0.5
    filter_alpha: float = 0.7
    filter_window: int = 10
    item_tower: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        registry.get(self.encoder)  # A clear error for an unknown name.
        for name in ("num_items", "max_len", "hidden_size", "num_layers", "num_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be at least 1. Got {self}.")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of "
                f"`num_heads` ({self.num_heads})."
            )

    def weight_differences(self, other: EncoderConfig) -> list[str]:
        """`weight_differences(self, other)`."""
        return weight_differences(self, other)


def weight_differences(
    fitted: ModelConfig | EncoderConfig, other: ModelConfig | EncoderConfig
) -> list[str]:
    """'hidden_size 64 vs 128', ... for each weight-shaping setting
    (`WEIGHT_FIELDS`) in which `other` differs from `fitted` (empty:
    `fitted`'s weights fit `other`'s encoder). Both a run's settings
    (`ModelConfig`) and an encoder on a dataset (`EncoderConfig`) have them."""
    return [
        f"{name} {getattr(fitted, name)} vs {getattr(other, name)}"
        for name in WEIGHT_FIELDS
        if getattr(fitted, name) != getattr(other, name)
    ]


def build_encoder(config: EncoderConfig):
    """The encoder of `config`, named after its kind ("sasrec", ...) in every
    model (`genni.models.encoders.registry`)."""
    return registry.build_encoder(config)

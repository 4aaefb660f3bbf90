"""Sequence encoders: the query tower of every model the project trains.

One protocol, one registry (`registry`), one module per encoder, shaped like
the negative samplers (`genni.components.samplers`). An encoder is a Keras
layer that

- owns the item embedding table, `item_embeddings` [num_items + 1, d] (row
  0 is padding), which is also the candidate tower;
- maps left-padded item ids [B, T] to h_t [B, T, d] at every position,
  `encoder(input_ids, training=..., causal=True, item_vectors=None,
  positions=None, segments=None)`: h_t never depends on an item after t
  (training scores every position of a packed row), nor on padding, nor on
  another sequence of a packed row (`positions`, `segments`:
  `genni.components.packing`); `causal=False` and `item_vectors` are what
  S3-Rec pre-training needs;
- is named after its registered name in every model, so its weights
  ("sasrec/...", "filtermix/...") are what a checkpoint, a warm start and a
  pre-trained encoder hold.

Callers build encoders from their settings (`genni.models.config`) through
`registry.build_encoder`, and name none: only `genni.models` names a
concrete encoder.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SequenceEncoder(Protocol):
    """What the retrieval model, pre-training and export ask of an encoder."""

    num_items: int
    max_len: int
    hidden_size: int

    @property
    def item_embeddings(self): ...

    def __call__(
        self,
        input_ids,
        training: bool = False,
        causal: bool = True,
        item_vectors=None,
        positions=None,
        segments=None,
    ): ...

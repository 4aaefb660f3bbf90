"""The sampler protocol: what every negative sampler takes and gives.

A model asks its sampler for negatives one way, whatever the sampler:

    sampler.setup(data)        # once: what it needs from the training data
    ids, log_q = sampler.negatives(queries, targets, item_embeddings, context,
                                   log_q=True)

`context` (`BatchContext`) is what a sampler may read of the batch beyond its
queries: the user's items (for `exclude_seen`), each position's input item
(GenNi's successor candidates). `log_q` is the log-probability of each draw,
which a sampled softmax subtracts (`genni.components.losses`). The model never
needs to know which sampler it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import tensorflow as tf

from genni.components.random import make_generator

# Rejection rounds before giving up on an excluded draw (the popularity sampler).
# With a catalog much larger than a user's history about 1 round is needed; a
# draw still excluded after these rounds is kept.
MAX_REJECTION_ROUNDS = 100


class SamplerData(Protocol):
    """What a sampler's `setup` may read of the training data
    (`genni.pipeline.training.data.Dataset` is one)."""

    def item_counts(self) -> np.ndarray:
        """[num_items + 1] training interactions of each item."""

    def successor_table(self, size: int) -> np.ndarray:
        """[num_items + 1, size] the items that most often followed each one."""


class BatchContext:
    """What a sampler may read of a batch besides its queries and targets.

    Each part is a tensor, or a function that makes it, called the first time
    a sampler asks (while the step is traced), so that a part no sampler
    reads costs nothing:

    - `user_items()`: ragged [N, None], the items of each position's user (a
      sampler with `exclude_seen` never draws them);
    - `previous()`: [N], each position's input item (GenNi's successor
      candidates score the items that followed it).
    """

    def __init__(
        self,
        user_items: tf.RaggedTensor | Callable | None = None,
        previous: tf.Tensor | Callable | None = None,
    ):
        self._parts = {"user_items": user_items, "previous": previous}

    def _get(self, name: str):
        part = self._parts[name]
        if callable(part):
            part = self._parts[name] = part()
        return part

    def user_items(self) -> tf.RaggedTensor | None:
        return self._get("user_items")

    def previous(self) -> tf.Tensor | None:
        return self._get("previous")


NO_CONTEXT = BatchContext()


class NegativeSampler(tf.keras.layers.Layer):
    """Base class: k negatives per row, drawn with a checkpointed generator.

    Args:
        num_items: catalog size; item ids run 1..num_items (0 is padding).
        num_negatives: k, negatives per row.
        seed: seed of the layer's `tf.random.Generator`.
        exclude_seen: never draw the items of the position's user
            (`BatchContext.user_items`), as the S3-Rec reference code's
            uniform sampler does.

    A subclass implements `call(queries, targets, item_embeddings, context,
    return_log_q)`, or, for a draw that reads neither the queries nor the
    item embeddings, `draw(targets, exclude, return_log_q)` under this
    class's `call`; `setup` if it needs the training data, and
    `alpha_variable` if its draws follow the model's own scores.
    """

    def __init__(
        self,
        num_items: int,
        num_negatives: int = 1,
        seed: int | None = None,
        exclude_seen: bool = False,
        **kwargs,
    ):
        super().__init__(trainable=False, **kwargs)
        if num_items < 2:
            raise ValueError(f"`num_items` must be at least 2. Got {num_items}.")
        if num_negatives < 1:
            raise ValueError(
                f"`num_negatives` must be at least 1. Got {num_negatives}."
            )
        self.num_items = num_items
        self.num_negatives = num_negatives
        self.seed = seed
        self.exclude_seen = bool(exclude_seen)
        self.generator = make_generator(seed)

    def setup(self, data: SamplerData) -> None:
        """Fill what the sampler needs from the training data (nothing here)."""

    def alpha_variable(self) -> tf.Variable | None:
        """The sharpness of a draw that follows the model's own scores (a
        variable a curriculum may move, reported each step); None here.

        (A method, not a class attribute `alpha`: Keras does not track, and
        so never checkpoints, an attribute its class also defines.)"""
        return None

    def negatives(
        self,
        queries: tf.Tensor,
        targets: tf.Tensor,
        item_embeddings: tf.Tensor,
        context: BatchContext = NO_CONTEXT,
        log_q: bool = False,
    ) -> tuple[tf.Tensor, tf.Tensor | None]:
        """The protocol: [N, k] negative ids and, with `log_q`, their [N, k]
        log-probabilities under the draw's law (else None)."""
        drawn = self(
            queries, targets, item_embeddings, context=context, return_log_q=log_q
        )
        return drawn if log_q else (drawn, None)

    def call(
        self,
        queries: tf.Tensor,
        targets: tf.Tensor,
        item_embeddings: tf.Tensor | None = None,
        context: BatchContext | None = None,
        return_log_q: bool = False,
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        """A draw that reads neither the queries nor the item embeddings:
        `check_ready`, then `draw` of the int64 targets and the rows'
        `excluded` items."""
        self.check_ready()
        exclude = self.excluded(context)
        return self.draw(tf.cast(targets, tf.int64), exclude, return_log_q)

    def check_ready(self) -> None:
        """Raise if the sampler cannot draw yet (nothing here)."""

    def draw(
        self, targets: tf.Tensor, exclude: tf.RaggedTensor | None, return_log_q: bool
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        """[N, k] negatives of int64 `targets` [N], never the rows' targets or
        `exclude` (and, with `return_log_q`, their [N, k] log Q)."""
        raise NotImplementedError

    def excluded(self, context: BatchContext | None) -> tf.RaggedTensor | None:
        """The items the rows must not draw besides their targets: the user's
        own with `exclude_seen`, else none."""
        if not self.exclude_seen:
            return None
        items = (context or NO_CONTEXT).user_items()
        if items is None:
            raise ValueError(
                "This sampler never draws the user's items (`exclude_seen`), "
                "but the batch context has none."
            )
        return items

    def _seed(self) -> tf.Tensor:
        """A fresh stateless seed, shape [2]."""
        return self.generator.make_seeds(1)[:, 0]

    def _reject(
        self,
        negatives: tf.Tensor,
        bad: tf.Tensor,
        redraw,
    ) -> tf.Tensor:
        """Redraw the entries where `bad(negatives)` holds until none is left.

        Args:
            negatives: [N, k] item ids.
            bad: callable [N, k] ids -> [N, k] bool, the draws to replace.
            redraw: callable (shape) -> fresh [N, k] ids from the same law.
        """

        def cond(i, negs):
            return tf.logical_and(i < MAX_REJECTION_ROUNDS, tf.reduce_any(bad(negs)))

        def body(i, negs):
            return i + 1, tf.where(bad(negs), redraw(tf.shape(negs)), negs)

        _, negatives = tf.while_loop(cond, body, (tf.constant(0), negatives))
        return negatives

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("trainable", None)
        config.update(
            num_items=self.num_items,
            num_negatives=self.num_negatives,
            seed=self.seed,
            exclude_seen=self.exclude_seen,
        )
        return config


def in_rows(ids: tf.Tensor, exclude: tf.RaggedTensor) -> tf.Tensor:
    """[N, k] bool: whether ids[n, j] is one of exclude[n]."""
    dense = exclude.to_tensor(default_value=-1)  # [N, L]
    return tf.reduce_any(ids[:, :, None] == dense[:, None, :], axis=-1)

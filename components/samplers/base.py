"""The shared shape of a negative sampler."""

from __future__ import annotations

import tensorflow as tf

from genni.components.random import make_generator

# Rejection rounds before giving up on an excluded draw (the popularity sampler).
# With a catalog much larger than a user's history about 1 round is needed; a
# draw still excluded after these rounds is kept.
MAX_REJECTION_ROUNDS = 100


class NegativeSampler(tf.keras.layers.Layer):
    """Base class: k negatives per row, drawn with a checkpointed generator.

    Args:
        num_items: catalog size; item ids run 1..num_items (0 is padding).
        num_negatives: k, negatives per row.
        seed: seed of the layer's `tf.random.Generator`.
    """

    def __init__(
        self,
        num_items: int,
        num_negatives: int = 1,
        seed: int | None = None,
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
        self.generator = make_generator(seed)

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
        )
        return config


def in_rows(ids: tf.Tensor, exclude: tf.RaggedTensor) -> tf.Tensor:
    """[N, k] bool: whether ids[n, j] is one of exclude[n]."""
    dense = exclude.to_tensor(default_value=-1)  # [N, L]
    return tf.reduce_any(ids[:, :, None] == dense[:, None, :], axis=-1)

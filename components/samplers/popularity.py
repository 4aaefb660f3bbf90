"""Popularity negatives: Q(i) proportional to count(i)^gamma."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from genni.components.samplers.base import (
    NegativeSampler,
    SamplerData,
    in_rows,
)


@tf.keras.utils.register_keras_serializable(package="genni")
class PopularitySampler(NegativeSampler):
    """Negatives drawn with probability proportional to count(i)^gamma.

    Args:
        item_counts: [num_items + 1] interaction counts, index 0 (padding)
            unused; None: the training data's, filled by `setup`.
        gamma: popularity exponent; 0 is uniform, 1 follows popularity.
        (others as `NegativeSampler`)

    A draw equal to the target (or, with `exclude_seen`, one of the user's
    items) is redrawn from the same law.
    """

    def __init__(
        self,
        num_items: int,
        item_counts: Sequence[float] | None = None,
        gamma: float = 1.0,
        num_negatives: int = 1,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(num_items, num_negatives, seed, **kwargs)
        if gamma < 0:
            raise ValueError(f"`gamma` must be non-negative. Got {gamma}.")
        self.gamma = gamma
        self.item_counts = None
        if item_counts is not None:
            self.set_counts(item_counts)

    def setup(self, data: SamplerData) -> None:
        """Draw from the training data's item counts."""
        self.set_counts(data.item_counts())

    def set_counts(self, item_counts: Sequence[float]) -> None:
        """The counts the law follows: [num_items + 1], index 0 unused."""
        num_items = self.num_items
        counts = np.asarray(item_counts, dtype=np.float64)
        if counts.shape != (num_items + 1,):
            raise ValueError(
                f"`item_counts` must have num_items + 1 = {num_items + 1} entries "
                f"(index 0 is padding). Got shape {counts.shape}."
            )
        if np.any(counts < 0):
            raise ValueError("`item_counts` must be non-negative.")
        weights = np.power(counts[1:], self.gamma)  # 0 ** 0 == 1: gamma 0 is uniform.
        if not np.any(weights > 0):
            raise ValueError("`item_counts` gives every item a zero probability.")
        with np.errstate(divide="ignore"):
            logits = np.log(weights).astype(np.float32)
        self.item_counts = counts.tolist()
        self._logits = tf.constant(logits[None, :])  # [1, V]

    def check_ready(self) -> None:
        if self.item_counts is None:
            raise ValueError("The popularity sampler has no item counts: `setup`.")

    def draw(
        self, targets: tf.Tensor, exclude: tf.RaggedTensor | None, return_log_q: bool
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        def sample(shape: tf.Tensor) -> tf.Tensor:
            flat = tf.random.stateless_categorical(
                self._logits, tf.reduce_prod(shape), self._seed(), dtype=tf.int64
            )
            return tf.reshape(flat, shape) + 1

        def bad(ids: tf.Tensor) -> tf.Tensor:
            hit = ids == targets[:, None]
            if exclude is not None:
                hit = tf.logical_or(hit, in_rows(ids, tf.cast(exclude, tf.int64)))
            return hit

        negatives = sample(tf.stack([tf.shape(targets)[0], self.num_negatives]))
        negatives = self._reject(negatives, bad, sample)
        if not return_log_q:
            return negatives
        # The popularity law renormalised without the row's target (the
        # rejected draws); excluded items of the user are not taken out.
        log_norm = tf.reduce_logsumexp(self._logits)
        log_p = tf.gather(self._logits[0], negatives - 1) - log_norm
        target_p = tf.exp(tf.gather(self._logits[0], targets - 1) - log_norm)
        return negatives, log_p - tf.math.log1p(-target_p)[:, None]

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(item_counts=self.item_counts, gamma=self.gamma)
        return config

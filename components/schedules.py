"""Schedules of GenNi's knobs: beta over epochs, alpha by self-adjustment."""

from __future__ import annotations

import tensorflow as tf

BETA_START = 0.001


def growing_beta(epoch: int, m: float) -> float:
    """beta = min(0.001 * 10^(epoch / m), 1): 0.1% of the catalog, growing to all.

    Args:
        epoch: 0-based epoch.
        m: epochs per tenfold growth (the paper uses 20 or 40).
    """
    if m <= 0:
        raise ValueError(f"`m` must be positive. Got {m}.")
    return min(BETA_START * 10.0 ** (epoch / m), 1.0)


def beta_for_epoch(epoch: int, beta: float, growth_epochs: float | None) -> float:
    """Fixed `beta`, or the growing schedule when `growth_epochs` is set."""
    return beta if growth_epochs is None else growing_beta(epoch, growth_epochs)


@tf.keras.utils.register_keras_serializable(package="genni")
class SelfAdjustingAlpha(tf.keras.layers.Layer):
    """The self-adjusted curriculum: alpha follows the batch loss.

    If the previous batch loss is larger than the current one (training goes
    well), alpha grows by `step` (harder negatives); otherwise it shrinks by
    `step`, never below 0. The first batch only records its loss.

    Args:
        step: change of alpha per batch.
    """

    def __init__(self, step: float, **kwargs):
        super().__init__(trainable=False, **kwargs)
        if step <= 0:
            raise ValueError(f"`step` must be positive. Got {step}.")
        self.step = step
        with tf.init_scope():
            self.previous_loss = tf.Variable(
                float("nan"), trainable=False, name="previous_loss"
            )

    def call(self, alpha: tf.Variable, loss: tf.Tensor) -> tf.Tensor:
        """Update `alpha` in place from `loss`; returns the new alpha."""
        loss = tf.cast(tf.stop_gradient(loss), tf.float32)
        previous = self.previous_loss
        better = previous > loss  # False while previous is NaN.
        delta = tf.where(better, self.step, -self.step)
        new_alpha = tf.where(
            tf.math.is_nan(previous), alpha, tf.maximum(alpha + delta, 0.0)
        )
        alpha.assign(new_alpha)
        previous.assign(loss)
        return new_alpha

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("trainable", None)
        config["step"] = self.step
        return config

"""Dropout whose random stream is part of the model's checkpoint."""

from __future__ import annotations

import tensorflow as tf

from genni.components.random import make_generator


@tf.keras.utils.register_keras_serializable(package="genni")
class CheckpointedDropout(tf.keras.layers.Layer):
    """Inverted dropout drawing from a `tf.random.Generator` the layer owns.

    Keras' own Dropout keeps its random state outside checkpoints, so a run
    resumed from a checkpoint would drop different units than an uninterrupted
    one. Here the generator state is a tracked variable: save, restore, and the
    masks continue exactly.

    Args:
        rate: fraction of units dropped while training, in [0, 1).
        seed: generator seed (None: non-deterministic).
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"`rate` must be in [0, 1). Got {rate}.")
        self.rate = rate
        self.seed = seed
        self.generator = make_generator(seed)

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        if not training or self.rate == 0.0:
            return inputs
        shape = tf.shape(inputs)
        if tf.distribute.get_strategy().num_replicas_in_sync > 1:
            # A generator's state moves by the size of each draw, and a
            # checkpoint keeps the first replica's state only: replicas whose
            # inputs differ in shape (an uneven last batch, packed rows) would
            # resume on another stream. A fixed-size draw of a seed moves every
            # replica's state alike.
            seed = self.generator.make_seeds(1)[:, 0]
            noise = tf.random.stateless_uniform(shape, seed, dtype=inputs.dtype)
        else:  # One replica: the stream of every run so far.
            noise = self.generator.uniform(shape, dtype=inputs.dtype)
        keep = noise >= self.rate
        scale = tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return tf.where(keep, inputs * scale, tf.zeros_like(inputs))

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed)
        return config

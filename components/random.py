"""Random generators that live in checkpoints."""

from __future__ import annotations

import tensorflow as tf


def make_generator(seed: int | None) -> tf.random.Generator:
    """A `tf.random.Generator` (seeded, or from OS entropy when `seed` is None).

    Created outside any function so that a layer owning it tracks its state
    variable: the state is saved and restored with the model's checkpoints.
    """
    with tf.init_scope():
        if seed is None:
            return tf.random.Generator.from_non_deterministic_state()
        return tf.random.Generator.from_seed(seed)

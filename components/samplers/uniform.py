"""Uniform negatives: the SASRec baseline."""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.base import NegativeSampler


@tf.keras.utils.register_keras_serializable(package="genni")
class UniformSampler(NegativeSampler):
    """Negatives drawn uniformly over all items but the target.

    With `exclude_seen` (the user's items, as the S3-Rec reference code does),
    the draw is uniform over the items that are neither the target nor
    excluded: an exact draw, no rejection loop. (A row with nothing left to
    draw gets arbitrary ids.)

    Example:

    >>> sampler = UniformSampler(num_items=100, num_negatives=2, seed=0)
    >>> sampler(tf.zeros([3, 8]), tf.constant([1, 2, 3])).shape
    TensorShape([3, 2])
    """

    def draw(
        self, targets: tf.Tensor, exclude: tf.RaggedTensor | None, return_log_q: bool
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        shape = tf.stack([tf.shape(targets)[0], self.num_negatives])
        if exclude is None:
            excluded = targets[:, None]  # (N, 1)
        else:
            excluded = tf.concat([targets[:, None], tf.cast(exclude, tf.int64)], axis=1)
            excluded = excluded.to_tensor(default_value=self.num_items + 1)
        # Sorted, distinct excluded ids per row; out-of-range fill sorts last.
        out = tf.constant(self.num_items + 1, tf.int64)
        excluded = tf.sort(excluded, axis=1)
        repeated = tf.pad(excluded[:, 1:] == excluded[:, :-1], [[0, 0], [1, 0]])
        excluded = tf.sort(tf.where(repeated, out, excluded), axis=1)  # (N, L)
        allowed = self.num_items - tf.reduce_sum(
            tf.cast(excluded <= self.num_items, tf.int64), axis=1
        )  # (N,)
        u = tf.random.stateless_uniform(shape, self._seed(), dtype=tf.float64)
        rank = tf.cast(
            u * tf.cast(tf.maximum(allowed, 1), tf.float64)[:, None], tf.int64
        )
        # The (rank+1)-th id that is not excluded: step over each excluded id
        # at or below the candidate, in increasing order.
        ids = rank + 1  # (N, k)

        def step(j, ids):
            column = tf.gather(excluded, j, axis=1)[:, None]  # (N, 1)
            return j + 1, ids + tf.cast(column <= ids, tf.int64)

        _, ids = tf.while_loop(
            lambda j, _: j < tf.shape(excluded)[1], step, (tf.constant(0), ids)
        )
        ids = tf.minimum(ids, self.num_items)
        if not return_log_q:
            return ids
        # Uniform over the row's allowed items: log Q = -log(allowed).
        log_q = -tf.math.log(tf.cast(tf.maximum(allowed, 1), tf.float32))
        return ids, tf.broadcast_to(log_q[:, None], tf.shape(ids))

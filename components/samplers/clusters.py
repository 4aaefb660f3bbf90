"""The item clusters of GenNi's two-level draw: k-means on the item table.

A two-level draw (`GenNiSampler(clusters=C)`) picks a cluster c from its mass
under the query, then an item in it. This module keeps the clusters: C
centroids of the item embeddings (Lloyd's k-means, warm-started from the last
centroids on every refresh, so that they follow the training table), each
item's cluster, and the items sorted by cluster (`order`, with each cluster's
`offsets` and `sizes`), so that a uniform draw within cluster c is one gather:
order[offsets[c] + floor(u * sizes[c])].

Core ops only (matmul, argmax, unsorted_segment_sum, argsort): it runs in the
training step's `tf.function`, under XLA, on CPU and GPU. Memory stays bounded
whatever the catalog: items are assigned in chunks of at most `max_logits`
item-centroid scores.
"""

from __future__ import annotations

import math

import tensorflow as tf


def default_clusters(num_items: int) -> int:
    """C for a catalog of `num_items`: the power of two nearest sqrt(N), so that
    a query scores about as many centroids as a cluster holds items (1,024 at
    10^6 items, 256 at 10^5), at least 2 and at most N."""
    c = 2 ** round(math.log2(max(2.0, math.sqrt(num_items))))
    return int(min(num_items, max(2, c)))


def assign(
    table: tf.Tensor, centroids: tf.Tensor, max_logits: int = 1 << 24
) -> tf.Tensor:
    """[N] int32: the nearest centroid (squared Euclidean) of each row of `table`.

    argmin_c |e - mu_c|^2 = argmax_c (e . mu_c - |mu_c|^2 / 2), over chunks of
    items so that at most `max_logits` scores are held at once.
    """
    n = tf.shape(table)[0]
    c = tf.shape(centroids)[0]
    rows = tf.maximum(1, tf.minimum(n, max_logits // c))
    num_chunks = (n + rows - 1) // rows
    padded = tf.pad(table, [[0, num_chunks * rows - n], [0, 0]])
    chunks = tf.reshape(padded, [num_chunks, rows, tf.shape(table)[1]])
    half_norms = 0.5 * tf.reduce_sum(tf.square(centroids), axis=-1)

    def nearest(chunk: tf.Tensor) -> tf.Tensor:
        scores = tf.matmul(chunk, centroids, transpose_b=True) - half_norms
        return tf.argmax(scores, axis=-1, output_type=tf.int32)

    nearest_ids = tf.map_fn(
        nearest,
        chunks,
        fn_output_signature=tf.TensorSpec([None], tf.int32),
        parallel_iterations=1,
    )
    return tf.reshape(nearest_ids, [-1])[:n]


def lloyd(
    table: tf.Tensor,
    centroids: tf.Tensor,
    iterations: int,
    seed: tf.Tensor,
    max_logits: int = 1 << 24,
) -> tuple[tf.Tensor, tf.Tensor]:
    """`iterations` (>= 1) Lloyd steps of k-means from `centroids`.

    A cluster left empty is re-seeded at a random item, so that all C clusters
    stay in use. Returns the new centroids [C, d] and each item's cluster [N]
    under them.
    """
    c = tf.shape(centroids)[0]
    n = tf.shape(table)[0]
    for step in range(iterations):
        members = assign(table, centroids, max_logits)
        sums = tf.math.unsorted_segment_sum(table, members, c)
        counts = tf.math.unsorted_segment_sum(tf.ones([n], table.dtype), members, c)
        random_items = tf.random.stateless_uniform(
            [c], seed + step, maxval=n, dtype=tf.int32
        )
        centroids = tf.where(
            counts[:, None] > 0,
            sums / tf.maximum(counts, 1.0)[:, None],
            tf.gather(table, random_items),
        )
    return centroids, assign(table, centroids, max_logits)


def initial_centroids(table: tf.Tensor, clusters: int, seed: tf.Tensor) -> tf.Tensor:
    """`clusters` distinct rows of `table`, drawn uniformly: k-means' start."""
    noise = tf.random.stateless_uniform([tf.shape(table)[0]], seed)
    _, picked = tf.math.top_k(noise, k=clusters, sorted=False)
    return tf.gather(table, picked)


def members(assignment: tf.Tensor, clusters: int) -> tuple[tf.Tensor, ...]:
    """The items of each cluster, for uniform draws within one.

    Returns `order` [N] int32 (item rows sorted by cluster), `offsets` [C]
    int32 (where each cluster starts in `order`), `sizes` [C] int32 and
    `rank` [N] int32 (where each item is in `order`).
    """
    order = tf.cast(tf.argsort(assignment, stable=True), tf.int32)
    sizes = tf.math.unsorted_segment_sum(tf.ones_like(assignment), assignment, clusters)
    offsets = tf.cumsum(sizes, exclusive=True)
    return order, offsets, sizes, tf.math.invert_permutation(order)

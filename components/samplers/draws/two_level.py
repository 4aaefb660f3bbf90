"""GenNi's two-level draw: importance resampling from the item clusters.

The items are clustered by k-means on their embeddings (`clusters`: C
centroids, refreshed every `cluster_refresh` draws, warm-started from the
last ones); a position draws R candidates from the clusters' masses under its
query, scores them exactly and resamples its k negatives from them. Cost per
position: C + R scores, whatever the catalog.
"""

from __future__ import annotations

import math

import tensorflow as tf

from genni.components.samplers import clusters as kmeans
from genni.components.samplers.categorical import categorical, cdf_block
from genni.components.samplers.draws import pick
from genni.components.samplers.draws.pick import NEG_INF

# Lloyd iterations at the first clustering and at each refresh (warm-started
# from the last centroids).
INITIAL_LLOYD = 10
REFRESH_LLOYD = 1


def refresh(sampler, table: tf.Tensor) -> None:
    """k-means on the current table every `cluster_refresh` draws: from
    random items on the first draw, warm-started afterwards."""

    def refresh():
        seed = sampler._seed()

        def first():
            start = kmeans.initial_centroids(table, sampler.clusters, seed)
            return kmeans.lloyd(table, start, INITIAL_LLOYD, seed, sampler.max_logits)

        def later():
            return kmeans.lloyd(
                table, sampler.centroids, REFRESH_LLOYD, seed, sampler.max_logits
            )

        centroids, assignment = tf.cond(sampler.cluster_draws == 0, first, later)
        order, offsets, sizes, rank = kmeans.members(assignment, sampler.clusters)
        sampler.centroids.assign(centroids)
        sampler.cluster_of.assign(assignment)
        sampler.cluster_rank.assign(rank)
        sampler.cluster_order.assign(order)
        sampler.cluster_offsets.assign(offsets)
        sampler.cluster_sizes.assign(sizes)
        return tf.constant(True)

    tf.cond(
        sampler.cluster_draws % sampler.cluster_refresh == 0,
        refresh,
        lambda: tf.constant(False),
    )
    sampler.cluster_draws.assign_add(1)


def draw(
    sampler,
    queries: tf.Tensor,
    targets: tf.Tensor,
    table: tf.Tensor,
    exclude: tf.RaggedTensor | None,
    return_log_q: bool,
):
    """The two-level draw: importance resampling from a cluster proposal.

    For a query q (alpha already in it), the proposal draws R candidates
    independently: a cluster c with probability proportional to
    |c| exp(q . mu_c), then an item of c uniformly, so that the proposal
    is P(i) = exp(q . mu_c(i)) / Z_mu. The row's target is left out of
    its cluster (one member fewer, skipped in the uniform pick), so no
    candidate is ever the target. Each candidate is then scored
    exactly, s_j = q . e_j, and the k negatives are resampled from the R
    with weights w_j = exp(s_j) / P(j), proportional to exp(s_j - q .
    mu_c(j)) (zero for the target and excluded items). As R grows the
    law of a negative tends to the exact softmax(s) over the catalog
    (sampling-importance-resampling); with good clusters few candidates
    suffice, since the proposal already follows the scores. log Q is the
    log of exact-law estimate exp(s_i) / Z^, with Z^ = Z_mu * mean_j w_j,
    the importance estimate of the catalog's mass.

    A row whose R candidates are all masked (rare: the target or the
    user's items took every draw) gets a uniform item other than its
    target.
    """
    refresh(sampler, table)
    centroids = tf.cast(sampler.centroids, queries.dtype)
    order = sampler.cluster_order
    offsets = sampler.cluster_offsets
    sizes = sampler.cluster_sizes
    rank = sampler.cluster_rank
    cluster_of = sampler.cluster_of
    r, k, c = sampler.cluster_samples, sampler.num_negatives, sampler.clusters
    n = tf.shape(queries)[0]
    # A row holds C centroid scores, R candidate embeddings and their
    # CDF blocks.
    per_row = c + r * (int(queries.shape[-1] or 64) + cdf_block(r, k))
    rows = tf.maximum(tf.minimum(max(1, sampler.max_logits // per_row), n), 1)
    chunk_queries = pick.in_chunks(queries, rows)  # (C, rows, d)
    chunk_masked = pick.in_chunks(pick.never_drawn(targets, exclude), rows)
    seeds = tf.transpose(sampler.generator.make_seeds(tf.shape(chunk_queries)[0]))
    num_items = tf.constant(sampler.num_items, tf.int64)

    def draw_chunk(args: tuple):
        q, ids, seed = args
        chunk_targets = ids[:, 0]  # The never-drawn ids start with the target.
        seed_c, seed_u, seed_w, seed_f = tf.unstack(
            tf.random.experimental.stateless_split(seed, 4)
        )
        centroid_scores = tf.matmul(q, centroids, transpose_b=True)  # (rows, C)
        # Each row's clusters without its target (id 0: none).
        target_rows = tf.cast(tf.maximum(chunk_targets - 1, 0), tf.int32)
        has_target = chunk_targets > 0
        target_cluster = tf.where(
            has_target, tf.gather(cluster_of, target_rows), -1
        )  # (rows,)
        row_sizes = sizes[None, :] - tf.one_hot(
            target_cluster, c, dtype=tf.int32
        )  # (rows, C)
        proposal = centroid_scores + tf.where(
            row_sizes > 0,
            tf.math.log(tf.cast(row_sizes, q.dtype)),
            tf.cast(NEG_INF, q.dtype),
        )
        picked = tf.cast(
            categorical(proposal, r, seed_c, cdf_block(c, r)), tf.int32
        )  # (rows, R)
        size = tf.gather(row_sizes, picked, batch_dims=1)
        u = tf.random.stateless_uniform(tf.shape(picked), seed_u)
        within = tf.minimum(tf.cast(u * tf.cast(size, u.dtype), tf.int32), size - 1)
        at = tf.gather(offsets, picked) + within
        # In the target's cluster, the slots from the target's on move up one.
        skip = tf.logical_and(
            picked == target_cluster[:, None],
            at >= tf.gather(rank, target_rows)[:, None],
        )
        item_rows = tf.gather(order, at + tf.cast(skip, tf.int32))
        candidates = tf.cast(item_rows, tf.int64) + 1  # (rows, R) ids
        scores = pick.row_scores(q, table, item_rows)  # (rows, R)
        log_w = scores - tf.gather(centroid_scores, picked, batch_dims=1)
        bad = tf.reduce_any(candidates[:, :, None] == ids[:, None, :], axis=-1)
        log_w = tf.where(bad, tf.cast(NEG_INF, log_w.dtype), log_w)
        empty = tf.reduce_all(bad, axis=-1)  # (rows,)
        picks = categorical(
            tf.where(empty[:, None], tf.zeros_like(log_w), log_w),
            k,
            seed_w,
            cdf_block(r, k),
        )  # (rows, k)
        drawn = tf.gather(candidates, picks, batch_dims=1)
        # The fallback: a uniform item other than the target.
        shift = tf.random.stateless_uniform(
            [tf.shape(q)[0], k], seed_f, 1, num_items, dtype=tf.int64
        )
        uniform = (chunk_targets[:, None] - 1 + shift) % num_items + 1
        drawn = tf.where(empty[:, None], uniform, drawn)
        if not return_log_q:
            return drawn
        log_z = tf.reduce_logsumexp(proposal, axis=-1, keepdims=True) + (
            tf.reduce_logsumexp(log_w, axis=-1, keepdims=True) - math.log(r)
        )
        log_q = tf.gather(scores, picks, batch_dims=1) - log_z
        log_uniform = tf.cast(-math.log(sampler.num_items - 1), log_q.dtype)
        return drawn, tf.where(empty[:, None], log_uniform, log_q)

    drawn = pick.over_chunks(
        draw_chunk, (chunk_queries, chunk_masked, seeds), k, queries.dtype, return_log_q
    )
    return pick.from_chunks(drawn, n, k)

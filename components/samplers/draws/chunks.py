"""A batch's GenNi draw a chunk of positions at a time: the exact, capped and
per-row modes, with or without successor candidates, through one loop.

Memory stays bounded whatever the catalog: a chunk holds at most the
sampler's `max_logits` scores, and one chunk is alive at a time. Each chunk
takes its own seed from the sampler's generator (and, with a V' per group or
per row, a second one for its candidates), in a fixed order, so that a
resumed run draws what an uninterrupted one would have.
"""

from __future__ import annotations

import tensorflow as tf

from genni.components.samplers.draws import capped, exact, per_row, pick, successors
from genni.components.samplers.draws.pick import NEG_INF


def draw(
    sampler,
    queries: tf.Tensor,
    targets: tf.Tensor,
    table: tf.Tensor,
    exclude: tf.RaggedTensor | None,
    previous: tf.Tensor | None,
    return_log_q: bool,
):
    """[N, k] negatives (and log Q) of a `GenNiSampler` that does not draw
    from clusters. `queries` carry alpha already; `table` is [V, d]."""
    m, num_items, k = sampler.num_candidates, sampler.num_items, sampler.num_negatives
    subset = m < num_items
    per_group = subset and sampler.beta_group is not None
    if not subset:
        candidate_ids, candidates = exact.candidates(table, num_items)
    elif not per_group:  # One V' per batch (per group: one per chunk, below).
        candidate_ids, candidates = capped.subset(table, num_items, m, sampler._seed())
    never = pick.never_drawn(targets, exclude)  # (N, 1 + L)
    n = tf.shape(queries)[0]
    repeats = per_group and capped.drawn_with_replacement(m, num_items)
    each_row = repeats and sampler.beta_group == 1  # Each position its own V'.
    limit = sampler.chunk_rows
    if each_row:  # A chunk holds its rows' candidate embeddings.
        d = int(queries.shape[-1] or 64)
        limit = max(1, sampler.max_logits // (sampler.width * (d + 1)))
    elif per_group:
        limit = min(limit, sampler.beta_group)
    rows = tf.maximum(tf.minimum(limit, n), 1)  # No padding past N.
    chunk_queries = pick.in_chunks(queries, rows)  # (C, rows, d)
    chunk_never = pick.in_chunks(never, rows)  # (C, rows, 1 + L)
    num_chunks = tf.shape(chunk_queries)[0]
    seeds = tf.transpose(sampler.generator.make_seeds(num_chunks))  # (C, 2)
    elems = (chunk_queries, chunk_never, seeds)
    if per_group:  # Seeds of each group's V'.
        elems += (tf.transpose(sampler.generator.make_seeds(num_chunks)),)
    extras = sampler.num_extra > 0 and previous is not None
    if extras:  # Each row's input item and its successors: (C, rows, 1 + S).
        ids = successors.extra_ids(previous, sampler.successor_table)
        elems += (pick.in_chunks(ids, rows),)
    log_subset = capped.log_subset(m, num_items, repeats)

    def draw_chunk(args: tuple):
        q, ids, seed = args[:3]
        if each_row:
            chunk_ids, logits = per_row.row_candidates(q, table, ids, args[3], m)
            logits = per_row.fallback(chunk_ids, logits, ids)
            extra = None
            if extras:
                logits, extra = successors.join(
                    q, table, args[-1], ids, chunk_ids, logits
                )
            return pick.draw(
                logits, chunk_ids, log_subset, k, seed, extra, return_log_q
            )
        if repeats:
            chunk_ids, chunk_candidates, repeated = capped.subset_with_replacement(
                table, num_items, m, args[3]
            )
        elif per_group:
            chunk_ids, chunk_candidates = capped.subset(table, num_items, m, args[3])
        else:
            chunk_ids, chunk_candidates = candidate_ids, candidates
        # Column of each never-drawn id, -1 for none (padding, id 0).
        columns = pick.columns(ids, chunk_ids) if subset else exact.columns(ids)
        logits = tf.matmul(q, chunk_candidates, transpose_b=True)  # (rows, m)
        if repeats:  # Each item once: its repeats never drawn.
            logits = tf.where(repeated[None, :], NEG_INF, logits)
        masked = pick.mask_columns(logits, columns, rows)
        if exclude is not None:  # Rows with nothing left keep all but the target.
            empty = tf.reduce_all(tf.math.is_inf(masked), axis=-1)
            masked = tf.cond(
                tf.reduce_any(empty),
                lambda: tf.where(
                    empty[:, None],
                    pick.mask_columns(logits, columns[:, 0, None], rows),
                    masked,
                ),
                lambda: masked,
            )
        extra = None
        if extras:
            masked, extra = successors.join(
                q, table, args[-1], ids, chunk_ids, masked, rows
            )
        return pick.draw(masked, chunk_ids, log_subset, k, seed, extra, return_log_q)

    drawn = pick.over_chunks(draw_chunk, elems, k, queries.dtype, return_log_q)
    return pick.from_chunks(drawn, n, k)

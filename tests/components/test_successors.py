"""GenNi's successor candidates: the table, the draw's law, what it never draws."""

import numpy as np
import pytest
import tensorflow as tf

from genni.components.samplers import GenNiSampler
from genni.components.samplers.base import BatchContext
from genni.components.samplers.successors import successor_table
from research import law

D = 4


def _ragged(*sequences):
    values = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences])
    splits = np.cumsum([0, *(len(s) for s in sequences)])
    return values, splits


def test_successor_table_counts_pairs_within_sequences_most_frequent_first():
    # 1 -> 2 twice, 1 -> 3 once, 2 -> 3 twice, 3 -> 1 once; the pair (3, 1)
    # across the first batch's two sequences is not a pair; an empty
    # sequence and a batch of one item add nothing.
    batches = [
        _ragged([1, 2, 3], [], [1, 2]),
        _ragged([2, 3, 1], [1, 3]),
        _ragged([4]),
    ]
    table = successor_table(batches, num_items=4, size=2)
    assert table.dtype == np.int32 and table.shape == (5, 2)
    np.testing.assert_array_equal(table, [[0, 0], [2, 3], [3, 0], [1, 0], [0, 0]])
    # Ties go to the smaller id; `size` keeps the most frequent.
    tied = successor_table([_ragged([5, 3], [5, 2], [5, 4], [5, 4])], 5, 2)
    np.testing.assert_array_equal(tied[5], [4, 2])
    np.testing.assert_array_equal(successor_table(batches, 4, 1)[1:, 0], [2, 3, 1, 0])
    with pytest.raises(ValueError, match="size"):
        successor_table(batches, 4, 0)


def _sampler(n, cap, successors, **kwargs):
    sampler = GenNiSampler(
        n, alpha=1.0, max_candidates=cap, successors=successors, seed=7, **kwargs
    )
    return sampler


@pytest.mark.parametrize("n, group", [(40, None), (160, 1)])
def test_the_draw_with_successors_has_the_closed_form_law_and_nears_the_exact(n, group):
    # n items, 4 uniform candidates: alone they rarely hold the query's
    # heavy items; with them as successors of the input item (9, itself an
    # extra candidate) the law comes near the exact softmax, and it is
    # `law.successor_law`'s. A V' per batch of 50 positions, or one per
    # position (a large catalog's: 4 ids drawn with replacement, repeats
    # masked, which rarely differs from 4 distinct ones here).
    cap, rows, calls = 4, 50, 160
    rng = np.random.default_rng(0)
    items = rng.normal(size=(n + 1, D)).astype(np.float32)
    query = rng.normal(size=(1, D)).astype(np.float32) * 2
    logits = (query @ items[1:].T)[0].astype(np.float64)
    target = int(np.argsort(-logits)[2]) + 1  # A heavy item, never drawn.
    heavy = [int(i) + 1 for i in np.argsort(-logits)[:2]]
    table = np.zeros((n + 1, 4), np.int64)
    table[9] = [heavy[0], target, heavy[1], heavy[0]]  # The target; a repeat.
    sampler = _sampler(n, cap, 4, beta_group=group)
    assert sampler.group_draws_with_replacement == (group is not None)
    sampler.set_successors(table)
    draw = tf.function(
        lambda: sampler(
            tf.repeat(tf.constant(query), rows, 0),
            tf.fill([rows], target),
            tf.constant(items),
            context=BatchContext(previous=tf.fill([rows], 9)),
        ),
        jit_compile=True,
    )
    drawn = np.concatenate([draw().numpy().ravel() for _ in range(calls)])
    assert not np.any(drawn == target)
    freq = np.bincount(drawn, minlength=n + 1)[1:] / len(drawn)
    masked = logits.copy()
    masked[target - 1] = -np.inf
    extras = np.zeros(n, bool)
    extras[[h - 1 for h in [*heavy, 9]]] = True  # The input item is one.
    closed = law.successor_law(masked, extras, cap, draws=3000)[0]
    exact = law.softmax(masked[None])[0]
    capped = law.capped_law(masked, cap, draws=3000)[0]
    assert law.total_variation(freq, closed) < 0.04
    assert law.total_variation(closed, exact) < 0.5 * law.total_variation(capped, exact)
    # Without an input item (or on a position with no successors) the draw is
    # the capped one.
    plain = sampler(tf.constant(query), tf.constant([target]), tf.constant(items))
    assert plain.shape == (1, 1)


def test_log_q_of_extras_and_uniform_candidates_share_one_estimate_of_the_mass():
    # log Q = alpha s_j - log Z^ for every pick of a row, whether it came from
    # the successors or the uniform subset: log Q - s is the same in a row.
    n, rows = 30, 64
    rng = np.random.default_rng(1)
    items = rng.normal(size=(n + 1, D)).astype(np.float32)
    queries = rng.normal(size=(rows, D)).astype(np.float32)
    sampler = GenNiSampler(
        n, num_negatives=16, alpha=1.0, max_candidates=5, successors=3, seed=2
    )
    table = np.zeros((n + 1, 3), np.int64)
    table[1:, 0] = np.arange(2, n + 2) % n + 1
    table[1:, 1] = np.arange(3, n + 3) % n + 1
    sampler.set_successors(table)
    previous = rng.integers(1, n + 1, rows)
    ids, log_q = sampler(
        tf.constant(queries),
        tf.constant(previous),  # Targets: the input items themselves.
        tf.constant(items),
        return_log_q=True,
        context=BatchContext(previous=tf.constant(previous)),
    )
    ids, log_q = ids.numpy(), log_q.numpy()
    scores = np.take_along_axis(queries @ items.T, ids, axis=1)
    spread = (log_q - scores).max(axis=1) - (log_q - scores).min(axis=1)
    assert np.all(spread < 1e-4)
    from_extras = np.any(ids[:, :, None] == table[previous][:, None, :2], axis=-1)
    # (The input item is each row's target here, so never drawn.)
    assert from_extras.any() and not from_extras.all()
    assert not np.any(ids == previous[:, None])


def test_successors_skip_excluded_items_and_are_off_when_every_item_is_scored():
    n = 12
    items = tf.random.stateless_normal([n + 1, D], [0, 1])
    sampler = _sampler(n, 3, 2, exclude_seen=True)
    table = np.zeros((n + 1, 2), np.int64)
    table[5] = [6, 7]
    sampler.set_successors(table)
    exclude = tf.ragged.constant([[6, 7]] * 200, dtype=tf.int64)
    drawn = sampler(
        tf.ones([200, D]),
        tf.fill([200], 1),
        items,
        context=BatchContext(user_items=exclude, previous=tf.fill([200], 5)),
    ).numpy()
    assert not np.isin(drawn, [1, 6, 7]).any()
    assert np.isin(drawn, [5]).any()  # The input item is a candidate.
    assert sampler.num_extra == 3 and sampler.width == 6
    assert _sampler(n, n, 2).num_extra == 0  # Every item scored already.


def test_successor_settings_are_checked_and_serialized():
    with pytest.raises(ValueError, match="successors"):
        GenNiSampler(10, successors=0)
    with pytest.raises(ValueError, match="two different GenNi draws"):
        GenNiSampler(10, successors=2, clusters=2)
    sampler = _sampler(10, 4, 2)
    with pytest.raises(ValueError, match="shape"):
        sampler.set_successors(np.zeros((10, 2), np.int64))
    with pytest.raises(ValueError, match="without"):
        _sampler(10, 4, None).set_successors(np.zeros((11, 2), np.int64))
    assert GenNiSampler.from_config(sampler.get_config()).successors == 2


def test_an_extra_in_the_uniform_subset_counts_once():
    # alpha 0, 11 of 12 items in the subset: nearly every extra is also a
    # uniform candidate. Counted once, extras and the other items are about
    # equally likely (1 against 12/11 x 11/12); counted twice, about 2:1.
    n, rows, calls = 12, 40, 400
    sampler = GenNiSampler(n, alpha=0.0, max_candidates=11, successors=2, seed=4)
    table = np.zeros((n + 1, 2), np.int64)
    table[5] = [6, 7]
    sampler.set_successors(table)
    draw = tf.function(
        lambda: sampler(
            tf.ones([rows, D]),
            tf.fill([rows], 1),
            tf.random.stateless_normal([n + 1, D], [0, 2]),
            context=BatchContext(previous=tf.fill([rows], 5)),
        ),
        jit_compile=True,
    )
    drawn = np.concatenate([draw().numpy().ravel() for _ in range(calls)])
    freq = np.bincount(drawn, minlength=n + 1)[1:] / len(drawn)
    logits = np.zeros(n)
    logits[0] = -np.inf  # The target.
    extras = np.isin(np.arange(1, n + 1), [5, 6, 7])  # Input item 5 and its two.
    closed = law.successor_law(logits, extras, 11, draws=2000)[0]
    assert law.total_variation(freq, closed) < 0.03
    ratio = freq[[4, 5, 6]].mean() / np.delete(freq, [0, 4, 5, 6]).mean()
    assert 0.8 < ratio < 1.2


def test_row_candidates_mask_repeats_and_never_drawn_ids():
    from genni.components.samplers.draws import per_row as rows

    table = tf.random.stateless_normal([6, D], [0, 3])  # Items 1..6.
    queries = tf.random.stateless_normal([500, D], [1, 3])
    never = tf.constant([[2, 0]] * 500, tf.int64)
    ids, logits = rows.row_candidates(queries, table, never, tf.constant([5, 6]), 8)
    ids, logits = ids.numpy(), logits.numpy()
    assert ids.min() >= 1 and ids.max() <= 6 and np.all(np.diff(ids, axis=1) >= 0)
    repeat = np.concatenate([np.zeros((500, 1), bool), ids[:, 1:] == ids[:, :-1]], 1)
    np.testing.assert_array_equal(np.isinf(logits), repeat | (ids == 2))
    scores = np.einsum("rd,rmd->rm", queries.numpy(), table.numpy()[ids - 1])
    np.testing.assert_allclose(
        logits[~np.isinf(logits)], scores[~np.isinf(logits)], rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("k", [1, 4])
def test_a_draw_per_position_with_excluded_items_traces_as_training_does(k):
    # Training traces the sampler with the user's items (`--exclude-seen`)
    # of unknown width. A V' per position of a large catalog (m x 32 <= n)
    # with successors must keep its static shapes there: it once failed
    # with "Input 'y' of 'Less' Op has type int32" at `genni train
    # --max-candidates 8 --beta-group 1 --successors 2 --exclude-seen`.
    n, rows = 400, 20
    sampler = _sampler(n, 8, 2, beta_group=1, num_negatives=k, exclude_seen=True)
    assert sampler.group_draws_with_replacement
    table = np.zeros((n + 1, 2), np.int64)
    table[5] = [6, 7]
    sampler.set_successors(table)
    items = tf.random.stateless_normal([n + 1, D], [0, 4])

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, D]),
            tf.TensorSpec([None], tf.int64),
            tf.RaggedTensorSpec([None, None], tf.int64),
            tf.TensorSpec([None], tf.int64),
        ]
    )
    def draw(queries, targets, exclude, previous):
        return sampler(
            queries,
            targets,
            items,
            context=BatchContext(user_items=exclude, previous=previous),
        )

    exclude = tf.ragged.constant([[6, 9]] * (rows // 2) + [[3]] * (rows // 2))
    drawn = draw(
        tf.ones([rows, D]),
        tf.fill([rows], tf.constant(1, tf.int64)),
        tf.cast(exclude, tf.int64),
        tf.fill([rows], tf.constant(5, tf.int64)),
    ).numpy()
    assert drawn.shape == (rows, k) and drawn.min() >= 1 and drawn.max() <= n
    assert not np.any(drawn == 1)  # The target.
    assert not np.any(drawn[: rows // 2] == 6) and not np.any(drawn[: rows // 2] == 9)
    assert not np.any(drawn[rows // 2 :] == 3)

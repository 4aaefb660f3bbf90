import numpy as np
import pytest
import tensorflow as tf

from genni.components import losses
from genni.components.samplers.base import BatchContext

# Float32 sums of unit-scale terms: oneDNN and Eigen add them in different
# orders, so compare with an absolute part too.
ATOL = 1e-5


def test_bce_hand_computed():
    # pos 0 -> -log(0.5) = 0.6931; negs 0 and log(3) -> -log(0.5) - log(0.25)
    pos = tf.constant([0.0, np.log(3.0)])
    neg = tf.constant([[0.0, np.log(3.0)], [0.0, 0.0]])
    row0 = np.log(2) + np.log(2) + np.log(4)
    row1 = -np.log(0.75) + 2 * np.log(2)
    assert float(losses.bce_loss(pos, neg)) == pytest.approx(
        (row0 + row1) / 2, rel=1e-5, abs=ATOL
    )


def test_bpr_hand_computed():
    pos = tf.constant([1.0])
    neg = tf.constant([[1.0, 1.0 - np.log(3.0)]])
    # margins 0 and log 3: -log(0.5) and -log(0.75), averaged.
    expected = (np.log(2) - np.log(0.75)) / 2
    assert float(losses.bpr_loss(pos, neg)) == pytest.approx(
        expected, rel=1e-5, abs=ATOL
    )


def test_softmax_ignores_padding_column():
    logits = tf.constant([[100.0, 0.0, 0.0, np.log(2.0)]])
    # Padding (column 0) is masked: p(target 3) = 2 / (1 + 1 + 2).
    value = float(losses.softmax_loss(logits, tf.constant([3])))
    assert value == pytest.approx(-np.log(0.5), rel=1e-5, abs=ATOL)


def test_losses_are_large_when_negatives_outscore_positives():
    good = losses.bce_loss(tf.constant([5.0]), tf.constant([[-5.0]]))
    bad = losses.bce_loss(tf.constant([-5.0]), tf.constant([[5.0]]))
    assert float(good) < 0.02 < 10 < float(bad)


def test_sampled_softmax_hand_computed():
    pos = tf.constant([1.0])
    neg = tf.constant([[0.5, -1.0]])
    log_q = tf.constant([[np.log(0.25), np.log(0.5)]])
    # Uncorrected: -log(e^1 / (e^1 + e^0.5 + e^-1)).
    plain = -1.0 + np.log(np.exp(1.0) + np.exp(0.5) + np.exp(-1.0))
    value = losses.sampled_softmax_loss(pos, neg)
    assert float(value) == pytest.approx(plain, rel=1e-6, abs=ATOL)
    # Corrected: each negative's exp divided by k Q = 2 * Q: 0.5 and 1.
    corrected = -1.0 + np.log(np.exp(1.0) + np.exp(0.5) / 0.5 + np.exp(-1.0) / 1.0)
    value = losses.sampled_softmax_loss(pos, neg, log_q)
    assert float(value) == pytest.approx(corrected, rel=1e-6, abs=ATOL)


def _genni_gradient(query, table, target, k, correction, alpha=1.0, seed=0):
    """Gradient of the sampled softmax w.r.t. the query and the item table,
    with k negatives drawn by GenNi from the same parameters."""
    from genni.components.samplers import GenNiSampler

    num_items = table.shape[0] - 1
    sampler = GenNiSampler(num_items, num_negatives=k, alpha=alpha, seed=seed)
    q, t = tf.Variable(query), tf.Variable(table)
    targets = tf.constant([target])
    with tf.GradientTape() as tape:
        negatives, log_q = sampler(q, targets, t, return_log_q=True)
        pos, neg = losses.sampled_logits(q, t, targets, negatives)
        loss = losses.sampled_softmax_loss(pos, neg, log_q if correction else None)
    gq, gt = tape.gradient(loss, [q, t])
    return np.concatenate(
        [gq.numpy().ravel(), tf.convert_to_tensor(gt).numpy().ravel()]
    )


def test_corrected_sampled_softmax_gradient_tends_to_the_full_softmax():
    """A tiny catalog where the full softmax is exact. The sampled gradient
    (w.r.t. the query and the item table, negatives drawn by GenNi), averaged
    over draws: with the log Q correction its error falls as k grows and ends
    small; without it, it stays biased (GenNi's hard negatives are
    over-represented), whatever k."""
    rng = np.random.default_rng(0)
    num_items, d, target = 50, 4, 7
    table = rng.normal(size=(num_items + 1, d)).astype(np.float32)
    query = rng.normal(size=(1, d)).astype(np.float32)
    q, t = tf.Variable(query), tf.Variable(table)
    with tf.GradientTape() as tape:
        logits = tf.matmul(q, t, transpose_b=True)
        full = losses.softmax_loss(logits, tf.constant([target]))
    gq, gt = tape.gradient(full, [q, t])
    exact = np.concatenate(
        [gq.numpy().ravel(), tf.convert_to_tensor(gt).numpy().ravel()]
    )

    def error(k, correction, draws=40):
        grads = [
            _genni_gradient(query, table, target, k, correction, alpha=2.0, seed=s)
            for s in range(draws)
        ]
        return np.linalg.norm(np.mean(grads, axis=0) - exact) / np.linalg.norm(exact)

    few, many = error(2, True), error(49, True)
    assert many < few / 2 and many < 0.06, (few, many)
    assert error(49, False) > 0.2


def test_genni_log_q_is_the_exact_draw_probability():
    from genni.components.samplers import GenNiSampler

    rng = np.random.default_rng(1)
    num_items, d = 40, 4
    table = tf.constant(rng.normal(size=(num_items + 1, d)).astype(np.float32))
    queries = tf.constant(rng.normal(size=(3, d)).astype(np.float32))
    targets = tf.constant([1, 2, 3])
    exclude = tf.ragged.constant([[4, 5], [], [6]])
    sampler = GenNiSampler(
        num_items, num_negatives=5, alpha=1.5, seed=0, exclude_seen=True
    )
    ids, log_q = sampler(
        queries,
        targets,
        table,
        context=BatchContext(user_items=exclude),
        return_log_q=True,
    )
    logits = 1.5 * tf.matmul(queries, table[1:], transpose_b=True).numpy()
    for row, masked in enumerate(([1, 4, 5], [2], [3, 6])):
        logits[row, np.array(masked) - 1] = -np.inf
    expected = tf.nn.log_softmax(logits).numpy()
    want = np.take_along_axis(expected, ids.numpy() - 1, axis=1)
    np.testing.assert_allclose(log_q.numpy(), want, rtol=1e-5, atol=1e-5)
    # With a beta fraction V', log(m / V) is added: alpha 0 gives about -log V.
    subset = GenNiSampler(num_items, num_negatives=5, alpha=0.0, beta=0.5, seed=0)
    _, log_q = subset(queries, targets, table, return_log_q=True)
    m = subset.num_candidates
    allowed = np.log(m / num_items) - np.log([m, m - 1])  # Target in V' or not.
    assert np.all(log_q.numpy() >= allowed.min() - 1e-5)
    assert np.all(log_q.numpy() <= allowed.max() + 1e-5)


def test_uniform_and_popularity_log_q():
    from genni.components.samplers import PopularitySampler, UniformSampler

    uniform = UniformSampler(10, num_negatives=3, seed=0, exclude_seen=True)
    exclude = tf.ragged.constant([[2, 3], []])
    ids, log_q = uniform(
        tf.zeros([2, 4]),
        tf.constant([1, 1]),
        context=BatchContext(user_items=exclude),
        return_log_q=True,
    )
    assert ids.shape == (2, 3)
    np.testing.assert_allclose(log_q.numpy()[0], -np.log(7.0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(log_q.numpy()[1], -np.log(9.0), rtol=1e-6, atol=1e-6)
    counts = np.array([0, 1, 2, 3, 4], dtype=np.float64)
    popular = PopularitySampler(4, item_counts=counts, num_negatives=2, seed=0)
    ids, log_q = popular(tf.zeros([1, 4]), tf.constant([4]), return_log_q=True)
    want = np.log(counts[ids.numpy()[0]] / 6.0)  # Without the target: 1 + 2 + 3.
    np.testing.assert_allclose(log_q.numpy()[0], want, rtol=1e-5, atol=1e-5)

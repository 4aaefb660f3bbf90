"""GenNi's two-level draw: the item clusters, and the law of its negatives."""

import numpy as np
import pytest
import tensorflow as tf

from genni.components.samplers import GenNiSampler
from genni.components.samplers import clusters as clusters_lib
from genni.components.samplers.base import BatchContext
from research import law

V, D = 20, 4


def _table(seed=0):
    return tf.random.stateless_normal([V + 1, D], [seed, 1])


def _frequencies(draws, n=V):
    counts = np.bincount(np.asarray(draws).ravel(), minlength=n + 1)
    return counts[1:] / counts.sum()


def _proposal_logits(sampler, queries):
    """log P(i) + const of the sampler's proposal, from its own clusters:
    alpha q . mu of item i's cluster."""
    order = sampler.cluster_order.numpy()
    offsets = sampler.cluster_offsets.numpy()
    sizes = sampler.cluster_sizes.numpy()
    cluster_of = np.empty(sampler.num_items, int)
    for c, (start, size) in enumerate(zip(offsets, sizes, strict=True)):
        cluster_of[order[start : start + size]] = c
    alpha = float(sampler.alpha.numpy())
    return (alpha * queries @ sampler.centroids.numpy().T)[:, cluster_of]


def test_assign_picks_the_nearest_centroid_in_chunks():
    table = tf.random.stateless_normal([101, 3], [1, 2])
    centroids = tf.random.stateless_normal([7, 3], [3, 4])
    distances = np.square(table.numpy()[:, None] - centroids.numpy()[None]).sum(-1)
    for max_logits in (7 * 9, 1 << 20):  # Chunks of 9 items; one chunk.
        got = clusters_lib.assign(table, centroids, max_logits).numpy()
        np.testing.assert_array_equal(got, distances.argmin(-1))


def test_lloyd_finds_separated_clusters_and_reseeds_an_empty_one():
    rng = np.random.default_rng(0)
    centres = 10.0 * np.eye(4, dtype=np.float32)
    truth = np.arange(200) % 4
    table = tf.constant(centres[truth] + 0.1 * rng.normal(size=(200, 4)), tf.float32)
    # Two starts at the same point: one cluster is empty after the first step
    # and must be re-seeded, or only three of the four groups get a centroid.
    start = tf.constant(centres[[0, 0, 1, 2]])
    found, assignment = clusters_lib.lloyd(table, start, 5, tf.constant([0, 1]))
    assignment = assignment.numpy()
    for group in range(4):  # Each true group is one cluster of its own.
        assert len(set(assignment[truth == group])) == 1
    assert len(set(assignment)) == 4
    np.testing.assert_allclose(
        np.sort(found.numpy(), axis=0), np.sort(centres, axis=0), atol=0.1
    )


def test_members_sort_the_items_by_cluster():
    assignment = tf.constant([2, 0, 2, 1, 0, 2], tf.int32)
    order, offsets, sizes, rank = (
        x.numpy() for x in clusters_lib.members(assignment, 4)
    )
    np.testing.assert_array_equal(sizes, [2, 1, 3, 0])
    np.testing.assert_array_equal(offsets, [0, 2, 3, 6])
    np.testing.assert_array_equal(order, [1, 4, 3, 0, 2, 5])
    np.testing.assert_array_equal(order[rank], np.arange(6))


def test_default_clusters_are_near_the_square_root_of_the_catalog():
    assert clusters_lib.default_clusters(1_000_000) == 1024
    assert clusters_lib.default_clusters(79_169) == 256
    assert clusters_lib.default_clusters(3) == 2


@pytest.mark.parametrize("samples", [1, 4, 64])
def test_the_two_level_law_is_the_resampled_law_and_tends_to_the_exact_one(samples):
    rows = 50_000
    table = _table()
    query = np.array([[1.0, -0.5, 0.25, 2.0]], np.float32)
    sampler = GenNiSampler(
        V, alpha=2.0, seed=1, clusters=4, cluster_samples=samples, cluster_refresh=10
    )
    # Target 0 (padding) masks nothing, so the law is over every item.
    draws = sampler(tf.constant(np.repeat(query, rows, 0)), tf.zeros([rows]), table)
    drawn = _frequencies(draws.numpy())
    logits = 2.0 * query @ table.numpy()[1:].T
    proposal = _proposal_logits(sampler, query)
    closed = law.resampled_law(logits, proposal, samples, draws=2000)[0]
    exact = law.softmax(logits)[0]
    # Sampling noise of 50,000 draws over 20 items: TV about 0.01.
    assert law.total_variation(drawn, closed) < 0.02
    if samples == 1:  # The proposal itself: a cluster's items share its score.
        assert law.total_variation(drawn, law.softmax(proposal)[0]) < 0.02
        assert law.total_variation(drawn, exact) > 0.2
    if samples == 64:
        assert law.total_variation(drawn, exact) < 0.04


def test_the_two_level_draw_never_draws_the_target_or_excluded_items():
    rows, target, seen = 3000, 3, [1, 5, 5, 9]
    table = _table().numpy()
    table[target] = 100.0  # The target dominates every query's scores.
    sampler = GenNiSampler(
        V, num_negatives=3, alpha=2.0, seed=4, clusters=4, exclude_seen=True
    )
    exclude = [seen] * rows
    exclude[0] = [i for i in range(1, V + 1) if i != target]  # Nothing left.
    draws = sampler(
        tf.ones([rows, D]),
        tf.fill([rows], target),
        tf.constant(table),
        context=BatchContext(user_items=tf.ragged.constant(exclude, dtype=tf.int64)),
    ).numpy()
    assert draws.shape == (rows, 3) and draws.min() >= 1 and draws.max() <= V
    assert not np.any(draws == target)
    assert not np.any(np.isin(draws[1:], seen))
    # The row left without candidates gets uniform items other than its target.
    assert set(draws[0]) <= set(exclude[0])


def test_log_q_estimates_the_exact_log_probability():
    rows = 500
    table = _table()
    queries = tf.random.stateless_normal([rows, D], [5, 6])
    sampler = GenNiSampler(
        V, num_negatives=2, alpha=1.0, seed=2, clusters=4, cluster_samples=256
    )
    ids, log_q = sampler(queries, tf.zeros([rows]), table, return_log_q=True)
    exact = np.log(law.softmax(queries.numpy() @ table.numpy()[1:].T))
    expected = np.take_along_axis(exact, ids.numpy() - 1, axis=1)
    # log Z^ is an estimate from 256 candidates: within a few percent.
    assert np.abs(log_q.numpy() - expected).mean() < 0.1


def test_the_clusters_follow_the_table_every_refresh_steps():
    table = tf.Variable(_table())
    sampler = GenNiSampler(V, alpha=1.0, seed=3, clusters=4, cluster_refresh=3)
    args = (tf.ones([8, D]), tf.fill([8], 1))
    sampler(*args, table)
    first = sampler.centroids.numpy()
    table.assign(table + 5.0)  # Every item moves...
    sampler(*args, table)
    sampler(*args, table)
    np.testing.assert_array_equal(sampler.centroids.numpy(), first)  # ...unseen,
    sampler(*args, table)  # ...until the 4th draw refreshes the clusters:
    # each centroid is then a mean of moved items (about 5 +- 1, not 0 +- 1).
    assert np.abs(first).max() < 2.5 < sampler.centroids.numpy().min()
    assert int(sampler.cluster_draws.numpy()) == 4


def test_the_two_level_draw_runs_under_xla_and_round_trips_its_state(tmp_path):
    sampler = GenNiSampler(V, num_negatives=2, alpha=2.0, seed=3, clusters=4)
    table = _table()

    @tf.function(jit_compile=True)
    def draw(q, t):
        return sampler(q, t, table)

    args = (tf.random.stateless_normal([7, D], [0, 2]), tf.fill([7], 4))
    assert not np.any(draw(*args).numpy() == 4)
    path = tf.train.Checkpoint(sampler=sampler).write(str(tmp_path / "s"))
    first = draw(*args).numpy()
    sampler.centroids.assign(tf.zeros_like(sampler.centroids))
    tf.train.Checkpoint(sampler=sampler).read(path).assert_consumed()
    np.testing.assert_array_equal(draw(*args).numpy(), first)


def test_serialization_keeps_the_cluster_settings():
    layer = GenNiSampler(V, clusters=4, cluster_samples=8, cluster_refresh=7, seed=1)
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert clone.get_config() == layer.get_config()
    assert (clone.clusters, clone.cluster_samples, clone.cluster_refresh) == (4, 8, 7)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(clusters=1), "clusters"),
        (dict(clusters=V + 1), "clusters"),
        (dict(clusters=4, cluster_samples=0), "cluster_samples"),
        (dict(clusters=4, cluster_refresh=0), "cluster_refresh"),
    ],
)
def test_errors_name_the_cluster_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GenNiSampler(V, **kwargs)


def test_the_resampled_law_in_closed_form_spans_proposal_to_exact():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 30)) * 2.0
    proposal = logits + rng.normal(size=(2, 30))
    one = law.resampled_law(logits, proposal, 1, draws=4)
    np.testing.assert_allclose(one, law.softmax(proposal))
    distances = [
        law.total_variation(law.resampled_law(logits, proposal, r), law.softmax(logits))
        for r in (1, 8, 256)
    ]
    assert distances[0][0] > distances[1][0] > distances[2][0]
    assert distances[2].max() < 0.05

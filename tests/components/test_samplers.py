"""Samplers: the laws they draw from, what they never draw, and their state."""

import numpy as np
import pytest
import tensorflow as tf

from genni.components.samplers import GenNiSampler, PopularitySampler, UniformSampler
from genni.components.samplers.base import BatchContext
from genni.components.samplers.categorical import categorical, cdf_block
from genni.components.samplers.draws import capped

V = 20  # items 1..20
D = 4


def _table(seed=0):
    return tf.random.stateless_normal([V + 1, D], [seed, 1])


def _frequencies(draws, n=V):
    counts = np.bincount(np.asarray(draws).ravel(), minlength=n + 1)
    return counts / counts.sum()


def _assert_close_to(freq, expected, rows):
    # Total variation distance: for `rows` draws over V items it is about
    # sqrt(V / rows) / 2 at most by chance; 0.05 is far above that here.
    assert 0.5 * np.abs(freq - expected).sum() < 0.05, (freq, expected)
    assert rows >= 4000


def _expected_genni(query, table, alpha, target):
    logits = alpha * (np.asarray(table)[1:] @ np.asarray(query))
    logits[target - 1] = -np.inf
    p = np.exp(logits - logits[np.isfinite(logits)].max())
    return np.concatenate([[0.0], p / p.sum()])


@pytest.mark.parametrize("alpha", [0.0, 1.0, 3.0])
def test_genni_frequencies_match_softmax_of_alpha_scores(alpha):
    rows, target = 6000, 3
    table = _table()
    query = tf.constant([1.0, -0.5, 0.25, 2.0])
    sampler = GenNiSampler(V, num_negatives=2, alpha=alpha, seed=11, max_logits=25600)
    draws = sampler(
        tf.tile(query[None], [rows, 1]), tf.fill([rows], target), table
    ).numpy()
    expected = _expected_genni(query, table, alpha, target)
    _assert_close_to(_frequencies(draws), expected, rows)
    assert not np.any(draws == target)
    if alpha == 0.0:  # Uniform over the other items.
        np.testing.assert_allclose(expected[1:].sum(), 1.0)
        assert np.allclose(np.delete(expected[1:], target - 1), 1 / (V - 1))


def test_genni_never_draws_the_target_even_when_it_dominates():
    table = _table().numpy()
    table[5] = 100.0  # Item 5 scores far above all others...
    rows = 500
    sampler = GenNiSampler(V, num_negatives=3, alpha=5.0, seed=1)
    draws = sampler(tf.ones([rows, D]), tf.fill([rows], 5), tf.constant(table))
    assert not np.any(draws.numpy() == 5)  # ...and is the target of every row.
    assert draws.shape == (rows, 3) and draws.dtype == tf.int64


def test_genni_excludes_the_users_items_and_keeps_the_softmax_law():
    rows, target, seen = 6000, 3, [1, 5, 5, 9]
    table = _table()
    query = tf.constant([1.0, -0.5, 0.25, 2.0])
    sampler = GenNiSampler(
        V, num_negatives=2, alpha=2.0, seed=4, max_logits=25600, exclude_seen=True
    )
    draws = sampler(
        tf.tile(query[None], [rows, 1]),
        tf.fill([rows], target),
        table,
        context=BatchContext(
            user_items=tf.ragged.constant([seen] * rows, dtype=tf.int64)
        ),
    ).numpy()
    expected = _expected_genni(query, table, 2.0, target)
    expected[seen] = 0.0
    expected /= expected.sum()
    _assert_close_to(_frequencies(draws), expected, rows)
    assert not np.any(np.isin(draws, [*seen, target]))


def test_genni_exclusion_with_beta_and_a_row_left_without_candidates():
    # Row 0 excludes every item but the target: it falls back to "not the
    # target". Row 1 excludes 1..10 and must draw from 11..20 only.
    sampler = GenNiSampler(
        V, num_negatives=3, alpha=1.0, beta=0.5, seed=5, exclude_seen=True
    )
    exclude = tf.ragged.constant(
        [[i for i in range(1, V + 1) if i != 2], list(range(1, 11))], dtype=tf.int64
    )
    for _ in range(20):
        draws = sampler(
            tf.ones([2, D]),
            tf.constant([2, 12]),
            _table(),
            context=BatchContext(user_items=exclude),
        ).numpy()
        assert not np.any(draws[0] == 2)
        assert np.all(draws[1] > 10) and not np.any(draws[1] == 12)


def test_genni_beta_restricts_the_candidates_of_a_batch():
    sampler = GenNiSampler(V, num_negatives=4, alpha=0.0, beta=0.25, seed=2)
    assert sampler.num_candidates == 5
    draws = sampler(tf.ones([300, D]), tf.fill([300], 1), _table()).numpy()
    assert len(np.unique(draws)) <= 5  # One shared subset of 5 items per call.
    # Over many calls every item (but the target) shows up.
    seen = set()
    for _ in range(30):
        seen |= set(
            sampler(tf.ones([10, D]), tf.fill([10], 1), _table()).numpy().ravel()
        )
    assert seen == set(range(2, V + 1))


def test_genni_max_candidates_caps_the_subset_and_its_log_q():
    # beta 1 over 20 items, capped at 6: one uniform subset of 6 per call,
    # log Q counting the subset's share of the catalog (6 / 20).
    sampler = GenNiSampler(V, num_negatives=2, alpha=0.0, max_candidates=6, seed=3)
    assert sampler.num_candidates == 6
    ids, log_q = sampler(
        tf.ones([200, D]), tf.fill([200], 1), _table(), return_log_q=True
    )
    assert len(np.unique(ids.numpy())) <= 6 and not np.any(ids.numpy() == 1)
    # alpha 0: uniform over the subset's items but the target (5 or 6 of
    # them), times the subset's share 6 / 20.
    within = np.exp(log_q.numpy()) * V / 6
    assert np.allclose(within, 1 / 5) or np.allclose(within, 1 / 6)
    # A cap above beta's share, or above the catalog, changes nothing.
    assert GenNiSampler(V, beta=0.25, max_candidates=6).num_candidates == 5
    assert GenNiSampler(V, max_candidates=1000).num_candidates == V
    assert GenNiSampler(V, num_negatives=8, max_candidates=2).num_candidates == 9
    with pytest.raises(ValueError, match="max_candidates"):
        GenNiSampler(V, max_candidates=0)
    config = GenNiSampler(V, max_candidates=6).get_config()
    assert GenNiSampler.from_config(config).num_candidates == 6


def test_genni_beta_group_draws_a_fresh_subset_per_group_of_positions():
    # beta 0.25: 5 candidates per group of 10 positions, groups of their own.
    sampler = GenNiSampler(
        V, num_negatives=4, alpha=0.0, beta=0.25, beta_group=10, seed=1
    )
    targets = np.arange(300) % V + 1
    draws = sampler(tf.ones([300, D]), tf.constant(targets), _table()).numpy()
    assert draws.shape == (300, 4)
    assert not np.any(draws == targets[:, None])  # Never the target.
    groups = draws.reshape(30, 40)
    assert all(len(np.unique(g)) <= 5 for g in groups)  # One V' per group...
    assert len(np.unique(draws)) == V  # ...and the groups' V' differ.


def test_genni_beta_group_keeps_the_law_of_each_subset():
    # alpha 0: uniform over all items but the target, whatever V' each group
    # drew; with exclusion, the excluded items are never drawn.
    rows, target, seen = 6000, 3, [1, 5, 9]
    sampler = GenNiSampler(V, alpha=0.0, beta=0.5, beta_group=7, seed=8)
    # In a graph, as training runs it (eagerly, 858 groups take 40 s).
    graph = tf.function(sampler)
    draws = graph(tf.ones([rows, D]), tf.fill([rows], target), _table()).numpy()
    expected = np.r_[0.0, np.full(V, 1.0 / (V - 1))]
    expected[target] = 0.0
    _assert_close_to(_frequencies(draws), expected, rows)
    sampler.exclude_seen = True  # The same draws, never the user's items.
    draws = graph(
        tf.ones([rows, D]),
        tf.fill([rows], target),
        _table(),
        context=BatchContext(
            user_items=tf.ragged.constant([seen] * rows, dtype=tf.int64)
        ),
    ).numpy()
    assert not np.any(np.isin(draws, [*seen, target]))
    sampler.exclude_seen = False

    @tf.function(jit_compile=True)
    def draw(q, t):
        return sampler(q, t, _table())

    assert not np.any(draw(tf.ones([15, D]), tf.fill([15], 4)).numpy() == 4)


def test_genni_beta_group_on_a_large_catalog_draws_ids_and_masks_repeats():
    # m * 32 <= |V|: each group's V' is m ids drawn with replacement, its
    # repeats masked. The law of a draw is then the capped one (a uniform
    # subset of about m items), the target never drawn, under XLA too.
    from research import law

    n, m, rows, target = 640, 20, 60_000, 3
    table = tf.random.stateless_normal([n + 1, D], [0, 1])
    query = np.array([[1.0, -0.5, 0.25, 2.0]], np.float32)
    sampler = GenNiSampler(
        n, alpha=1.0, max_candidates=m, beta_group=1, seed=2, max_logits=1 << 20
    )
    assert sampler.group_draws_with_replacement
    assert not GenNiSampler(
        n - 1, max_candidates=m, beta_group=1
    ).group_draws_with_replacement
    draws = tf.function(sampler, jit_compile=True)(
        tf.constant(np.repeat(query, rows, 0)), tf.fill([rows], target), table
    ).numpy()
    assert not np.any(draws == target)
    logits = (query @ table.numpy()[1:].T).astype(np.float64)
    logits[0, target - 1] = -np.inf
    expected = law.capped_law(logits, m, draws=400)[0]
    counts = np.bincount(draws.ravel(), minlength=n + 1)[1:]
    # Sampling noise of 60,000 draws over 640 items: TV about 0.05.
    assert law.total_variation(counts / rows, expected) < 0.08
    ids, _, repeated = capped.subset_with_replacement(
        table[1:], n, sampler.num_candidates, tf.constant([3, 4])
    )
    ids, repeated = ids.numpy(), repeated.numpy()
    assert np.all(np.diff(ids) >= 0) and ids.min() >= 1 and ids.max() <= n
    np.testing.assert_array_equal(repeated[1:], ids[1:] == ids[:-1])
    _, log_q = sampler(
        tf.constant(query), tf.constant([target]), table, return_log_q=True
    )
    share = 1 - (1 - 1 / n) ** m  # P(an item is among m draws).
    assert log_q.numpy()[0, 0] < np.log(share) + 1e-6


def test_genni_group_draws_with_replacement_score_each_item_once(monkeypatch):
    # Forced on a small catalog, where m = 10 draws of 20 ids nearly always
    # repeat one: at alpha 0 each distinct candidate is still equally likely
    # (a repeat counted twice would be drawn about twice as often).
    monkeypatch.setattr(capped, "REPEATS_RATIO", 1)
    rows = 2000
    sampler = GenNiSampler(V, alpha=0.0, beta=0.5, beta_group=rows, seed=6)
    assert sampler.group_draws_with_replacement
    for _ in range(3):  # One V' per call.
        draws = sampler(tf.ones([rows, D]), tf.zeros([rows]), _table()).numpy()
        counts = np.bincount(draws.ravel(), minlength=V + 1)[1:]
        drawn = counts[counts > 0]
        assert len(drawn) <= 10
        assert drawn.max() < 1.3 * drawn.mean(), counts


def _cpu_bytes(stat):
    """Bytes of the CPU allocator (BFC, as conftest sets): "current" or "peak"."""
    return tf.config.experimental.get_memory_info("CPU:0")[stat]


def test_genni_chunking_keeps_memory_bounded_and_results_valid():
    sampler = GenNiSampler(V, num_negatives=1, alpha=1.0, max_logits=3 * 256, seed=0)
    # A row: 20 logits in two blocks of 16, and one block for the draw.
    assert sampler.cdf_block == 16
    assert sampler.chunk_rows == 3 * 256 // (3 * 16)
    targets = tf.constant(np.arange(1, 11) % V + 1)
    draws = sampler(tf.ones([10, D]), targets, _table()).numpy()
    assert draws.shape == (10, 1)
    assert np.all((draws >= 1) & (draws <= V))
    assert not np.any(draws[:, 0] == targets.numpy())
    # The peak memory of a draw follows `max_logits`, not the number of rows:
    # 512 rows x 4096 items are 8 MiB of logits, a chunk of 16 rows 1/32 of it.
    items, rows = 4096, 512
    size = cdf_block(items, 1)
    max_logits = 16 * (items // size + 1) * size
    big = GenNiSampler(items, alpha=1.0, max_logits=max_logits, seed=0)
    assert big.chunk_rows == 16
    with tf.device("CPU:0"):
        args = (
            tf.random.stateless_normal([rows, D], [2, 1]),
            tf.range(1, rows + 1),
            tf.random.stateless_normal([items + 1, D], [0, 1]),
        )
        for draw in (big, tf.function(big)):
            draw(*args)  # Traced, generator built.
            tf.config.experimental.reset_memory_stats("CPU:0")
            before = _cpu_bytes("current")
            draw(*args)
            peak = _cpu_bytes("peak") - before
            assert peak < 8 * 4 * max_logits < rows * items * 4, peak


def test_genni_runs_under_xla_and_in_tf_function():
    sampler = GenNiSampler(V, num_negatives=2, alpha=2.0, beta=0.5, seed=3)
    table = _table()

    @tf.function(jit_compile=True)
    def draw(q, t):
        return sampler(q, t, table)

    out = draw(tf.ones([7, D]), tf.fill([7], 4)).numpy()
    assert out.shape == (7, 2) and not np.any(out == 4)


CLASSES = 5  # Item i is in class i % CLASSES, the unit vector of axis i % CLASSES.


def _pointing_queries(rows):
    """A table of CLASSES orthogonal classes of items and `rows` queries, row r
    pointing hard at class r % CLASSES: its softmax puts ~all mass there."""
    table = np.zeros([V + 1, CLASSES], np.float32)
    table[np.arange(1, V + 1), np.arange(1, V + 1) % CLASSES] = 1.0
    own = np.arange(rows) % CLASSES
    queries = 20.0 * np.eye(CLASSES, dtype=np.float32)[own]
    return tf.constant(table), tf.constant(queries), own


@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # All items, one chunk.
        dict(max_logits=3 * 640),  # Chunks of 3 rows.
        dict(beta=0.75),  # One V' of 15 items per call.
        dict(beta=0.75, beta_group=3),  # One V' per 3 rows.
    ],
)
def test_genni_scores_each_row_with_its_own_query(kwargs, exclude):
    rows, k, calls = 30, 4, 5
    table, queries, own = _pointing_queries(rows)
    # Targets in another class than the row's own (never drawn anyway).
    targets = (own + 2) % CLASSES + CLASSES
    sampler = GenNiSampler(
        V, num_negatives=k, alpha=1.0, seed=3, exclude_seen=exclude, **kwargs
    )
    args = (queries, tf.constant(targets), table)
    if exclude:  # One own-class item per row; row 0 excludes every other item
        # and falls back to "not the target", still scored with its own query.
        seen = [[own[r] + CLASSES] for r in range(rows)]
        seen[0] = [i for i in range(1, V + 1) if i != targets[0]]
        args += (BatchContext(user_items=tf.ragged.constant(seen, dtype=tf.int64)),)
    draws = np.stack([sampler(*args).numpy() for _ in range(calls)], axis=1)
    in_own_class = draws % CLASSES == own[:, None, None]  # (rows, calls, k)
    # V' may miss a class now and then (beta < 1): nearly all, not all.
    assert in_own_class.mean() > 0.9, in_own_class.mean(axis=(1, 2))
    assert np.all(in_own_class.mean(axis=(1, 2)) > 0.5)
    assert not np.any(draws == targets[:, None, None])
    if exclude:
        excluded = np.array([s[0] for s in seen[1:]])
        assert not np.any(draws[1:] == excluded[:, None, None])


def test_genni_has_no_gradient_through_the_draw():
    items, rows = 5000, 64
    table = tf.Variable(tf.random.stateless_normal([items + 1, D], [0, 1]))
    q = tf.Variable(tf.random.stateless_normal([rows, D], [1, 1]))
    targets = tf.range(1, rows + 1)

    def sampler():
        return GenNiSampler(items, num_negatives=2, alpha=1.0, seed=0)

    def sampled_loss(negatives):
        positive = tf.reduce_sum(q * tf.gather(table, targets), axis=-1)
        negative = tf.einsum("nd,nkd->nk", q, tf.gather(table, negatives))
        return tf.reduce_sum(tf.nn.softplus(negative)) - tf.reduce_sum(positive)

    def gradients(tape, loss):
        return [
            tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, [q, table])
        ]

    with tf.device("CPU:0"):
        with tf.GradientTape() as tape:
            negatives = sampler()(q, targets, table)
            loss = sampled_loss(negatives)
        # The same draws as constants: the gradient the loss must have.
        fixed = tf.constant(sampler()(q, targets, table).numpy())
        np.testing.assert_array_equal(negatives.numpy(), fixed.numpy())
        with tf.GradientTape() as fixed_tape:
            fixed_loss = sampled_loss(fixed)
        for got, expected in zip(
            gradients(tape, loss), gradients(fixed_tape, fixed_loss), strict=True
        ):
            np.testing.assert_array_equal(got, expected)
        # Ids carry no gradient anyway; the draw must also stay off the tape:
        # one recording the scoring would hold every chunk's logits (64 x 5000
        # floats, 1.2 MiB, several times over) until the tape is released.
        draw = sampler()
        draw(q, targets, table)
        before = _cpu_bytes("current")
        with tf.GradientTape():
            draw(q, targets, table)
            held = _cpu_bytes("current") - before
    assert held < rows * items, held


def test_genni_state_round_trip_repeats_the_draws(tmp_path):
    sampler = GenNiSampler(V, num_negatives=2, alpha=1.5, seed=4)
    args = (tf.ones([5, D]), tf.fill([5], 2), _table())
    sampler(*args)
    path = tf.train.Checkpoint(sampler=sampler).write(str(tmp_path / "s"))
    first = sampler(*args).numpy()
    sampler.alpha.assign(0.0)
    tf.train.Checkpoint(sampler=sampler).read(path).assert_consumed()
    assert float(sampler.alpha.numpy()) == 1.5
    np.testing.assert_array_equal(sampler(*args).numpy(), first)


@pytest.mark.parametrize(
    "layer",
    [
        GenNiSampler(V, num_negatives=3, alpha=2.0, beta=0.5, max_logits=99, seed=5),
        GenNiSampler(V, beta=0.5, beta_group=50, seed=5),
        UniformSampler(V, num_negatives=2, seed=6),
        PopularitySampler(V, list(range(V + 1)), gamma=0.5, num_negatives=2, seed=7),
    ],
)
def test_serialization(layer):
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert type(clone) is type(layer)
    assert clone.get_config() == layer.get_config()


def test_sampler_inside_a_functional_model_predicts():
    queries = tf.keras.Input([D])
    targets = tf.keras.Input([], dtype=tf.int64)
    sampler = GenNiSampler(V, num_negatives=2, seed=8)
    table = _table()
    outputs = tf.keras.layers.Lambda(lambda x: sampler(x[0], x[1], table))(
        [queries, targets]
    )
    model = tf.keras.Model([queries, targets], outputs)
    out = model.predict([np.ones([6, D], np.float32), np.arange(1, 7)], verbose=0)
    assert out.shape == (6, 2) and not np.any(out == np.arange(1, 7)[:, None])


def test_uniform_is_uniform_without_the_target():
    rows, target = 8000, 7
    draws = UniformSampler(V, num_negatives=1, seed=0)(
        tf.zeros([rows, D]), tf.fill([rows], target)
    ).numpy()
    expected = np.full(V + 1, 1 / (V - 1))
    expected[[0, target]] = 0
    _assert_close_to(_frequencies(draws), expected, rows)


def test_uniform_excludes_the_users_items():
    # Row 0: target 1 and items 2..19 seen, so item 20 is the only negative.
    exclude = tf.ragged.constant([list(range(2, V)), [1, 2, 3]])
    draws = UniformSampler(V, num_negatives=50, seed=1, exclude_seen=True)(
        tf.zeros([2, D]), tf.constant([1, 4]), context=BatchContext(user_items=exclude)
    ).numpy()
    assert np.all(draws[0] == V)
    assert not np.any(np.isin(draws[1], [1, 2, 3, 4]))
    many = UniformSampler(V, num_negatives=8000, seed=2, exclude_seen=True)(
        tf.zeros([1, D]),
        tf.constant([4]),
        context=BatchContext(user_items=tf.ragged.constant([[1, 3, 3, 2]])),
    ).numpy()
    expected = np.full(V + 1, 1 / (V - 4))
    expected[[0, 1, 2, 3, 4]] = 0
    _assert_close_to(_frequencies(many), expected, many.size)


def test_popularity_follows_count_to_the_gamma():
    counts = np.zeros(V + 1)
    counts[1:] = np.arange(1, V + 1)
    counts[9] = 0  # Never drawn.
    rows, target, gamma = 8000, 20, 1.5
    draws = PopularitySampler(V, counts.tolist(), gamma, seed=2)(
        tf.zeros([rows, D]), tf.fill([rows], target)
    ).numpy()
    expected = counts**gamma
    expected[target] = 0
    expected /= expected.sum()
    _assert_close_to(_frequencies(draws), expected, rows)
    assert not np.any(draws == 9) and not np.any(draws == target)


def test_categorical_matches_probabilities_and_skips_masked_columns():
    logits = tf.constant([[0.0, -np.inf, 1.0, 2.0, -np.inf]])
    draws = categorical(tf.tile(logits, [4000, 1]), 2, tf.constant([1, 2])).numpy()
    p = np.exp([0.0, 1.0, 2.0])
    p /= p.sum()
    freq = np.bincount(draws.ravel(), minlength=5) / draws.size
    np.testing.assert_allclose(freq[[0, 2, 3]], p, atol=0.03)
    assert freq[1] == 0 and freq[4] == 0


@pytest.mark.parametrize("size", [16, 32, 128])
def test_categorical_law_is_the_same_for_every_block_size(size):
    """200 columns span several blocks of 16 or 32 (and part of one of 128)."""
    rng = np.random.default_rng(3)
    logits = rng.normal(size=200).astype(np.float32) * 2
    logits[[5, 40, 199]] = -np.inf
    rows, k = 2500, 40
    draws = categorical(
        tf.tile(tf.constant(logits)[None, :], [rows, 1]), k, tf.constant([4, 5]), size
    ).numpy()
    p = np.exp(logits - logits[np.isfinite(logits)].max())
    p /= p.sum()
    _assert_close_to(
        np.bincount(draws.ravel(), minlength=200) / draws.size, p, rows * k
    )
    assert not np.isin(draws, [5, 40, 199]).any()


def test_cdf_block_shrinks_with_many_draws():
    assert cdf_block(12101, 1) == 128
    assert cdf_block(12101, 64) == 32
    assert cdf_block(10**6, 1) == 128 and cdf_block(30, 2) == 16
    sampler = GenNiSampler(12101, num_negatives=64)
    assert sampler.cdf_block == 32


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GenNiSampler(V, alpha=-1.0), "alpha"),
        (lambda: GenNiSampler(V, beta=0.0), "beta"),
        (lambda: GenNiSampler(V, beta=1.5), "beta"),
        (lambda: GenNiSampler(V, num_negatives=V), "num_negatives"),
        (lambda: UniformSampler(1), "num_items"),
        (lambda: UniformSampler(V, num_negatives=0), "num_negatives"),
        (lambda: PopularitySampler(V, [1.0] * V), "num_items \\+ 1"),
        (lambda: PopularitySampler(V, [0.0] * (V + 1)), "zero probability"),
    ],
)
def test_errors_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_capped_law_in_closed_form_is_the_capped_samplers_law():
    from research import law

    # 12 items, 4 candidates per batch (max_candidates), one query: the law
    # of many batches' draws is `law.capped_law`'s, and differs from the
    # exact softmax, which a cap at the catalog gives back.
    n, cap, batches = 12, 4, 3000
    items = np.random.default_rng(0).normal(size=(n + 1, D)).astype(np.float32)
    query = np.random.default_rng(1).normal(size=(1, D)).astype(np.float32)
    logits = (query @ items[1:].T).astype(np.float64)  # alpha 1
    sampler = GenNiSampler(n, alpha=1.0, max_candidates=cap, seed=5)
    draw = tf.function(
        lambda: sampler(tf.constant(np.repeat(query, 1, 0)), tf.constant([0]), items)
    )
    counts = np.bincount(
        [int(draw().numpy()[0, 0]) for _ in range(batches)], minlength=n + 1
    )[1:]
    drawn = counts / batches
    closed = law.capped_law(logits, cap, draws=4000)[0]
    exact = law.softmax(logits)[0]
    assert law.total_variation(drawn, closed) < 0.05
    assert law.total_variation(closed, exact) > 0.1
    assert np.allclose(law.capped_law(logits, n, draws=1), law.softmax(logits))

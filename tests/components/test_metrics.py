import numpy as np
import pytest
import tensorflow as tf

from genni.components import metrics
from genni.components.metrics import (
    CANDIDATES,
    RankingAccumulator,
    chunked_target_ranks,
    metrics_consistent,
    ndcg_gap_bounds,
    ranking_metrics,
    target_ranks,
)


def numpy_ranks(scores, targets, histories, candidates="new"):
    """The protocol item by item: one loop per target, no vector tricks."""
    ranks = []
    for row, target, seen in zip(scores, targets, histories, strict=True):
        excluded = {0} | (set(seen) if candidates == "new" else set())
        own = row[target]
        if target in excluded or not np.isfinite(own):
            ranks.append(len(row))
            continue
        ahead = 0
        for item, score in enumerate(row):
            if item == target or item in excluded:
                continue
            if np.isnan(score) or score >= own:
                ahead += 1
        ranks.append(ahead)
    return np.array(ranks)


def _ranks(scores, targets, histories, candidates="new"):
    return target_ranks(
        tf.constant(scores, tf.float32),
        tf.constant(targets),
        tf.ragged.constant(histories, dtype=tf.int64, ragged_rank=1)
        if any(histories)
        else tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], tf.int64), [0] * len(histories)
        ),
        candidates,
    ).numpy()


@pytest.mark.parametrize("candidates", CANDIDATES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranks_match_the_item_by_item_oracle(seed, candidates):
    rng = np.random.default_rng(seed)
    batch, items = 32, 30
    scores = rng.normal(size=(batch, items + 1)).astype(np.float32)
    scores[:, 5] = scores[:, 6]  # Ties.
    # Non-finite scores of targets and of other items.
    scores[rng.random(scores.shape) < 0.05] = np.nan
    scores[rng.random(scores.shape) < 0.03] = np.inf
    scores[rng.random(scores.shape) < 0.03] = -np.inf
    targets = rng.integers(1, items + 1, size=batch)
    histories = [
        [int(i) for i in rng.integers(1, items + 1, size=rng.integers(0, 6))]
        for _ in range(batch)
    ]
    for row in range(0, batch, 4):  # Repeated targets.
        histories[row].append(int(targets[row]))
    got = _ranks(scores, targets, histories, candidates)
    np.testing.assert_array_equal(
        got, numpy_ranks(scores, targets, histories, candidates)
    )


def _ragged(histories):
    return tf.RaggedTensor.from_row_lengths(
        tf.constant([i for h in histories for i in h], tf.int64),
        [len(h) for h in histories],
    )


@pytest.mark.parametrize("candidates", CANDIDATES)
@pytest.mark.parametrize("chunk_size", [1, 7, 31, 1000])
def test_chunked_ranks_are_the_full_matrix_ranks(chunk_size, candidates):
    # Small integers: every dot product is exact in any summation order, so the
    # chunked ranks must equal the oracle's on the full matrix exactly, ties,
    # non-finite scores, repeated history items and repeated targets included.
    rng = np.random.default_rng(chunk_size)
    batch, items, dim = 24, 30, 3
    queries = rng.integers(1, 4, size=(batch, dim)).astype(np.float32)
    table = rng.integers(-2, 3, size=(items + 1, dim)).astype(np.float32)
    table[6] = table[5]  # Ties.
    table[7, 0], table[8, 1], table[9, 2] = np.nan, np.inf, -np.inf
    targets = rng.integers(1, items + 1, size=batch)
    targets[:3] = [7, 8, 9]  # Non-finite target scores.
    histories = [
        [int(i) for i in rng.integers(1, items + 1, size=rng.integers(0, 6))]
        for _ in range(batch)
    ]
    histories[3] += histories[3][:1] * 2 + [7]  # Repeats, a NaN item seen.
    for row in range(0, batch, 5):
        histories[row].append(int(targets[row]))
    got = chunked_target_ranks(
        tf.constant(queries),
        tf.constant(table),
        tf.constant(targets),
        _ragged(histories),
        candidates,
        chunk_size,
    ).numpy()
    expected = numpy_ranks(queries @ table.T, targets, histories, candidates)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        got, _ranks(queries @ table.T, targets, histories, candidates)
    )


def test_chunked_ranks_run_in_a_graph_and_check_the_chunk():
    queries, table = tf.ones([2, 2]), tf.constant([[0.0, 0], [1, 1], [2, 2], [0, 0]])
    ranks = tf.function(chunked_target_ranks)(
        queries, table, tf.constant([1, 3]), _ragged([[], [1, 2]]), "new", 2
    )
    np.testing.assert_array_equal(
        ranks.numpy(), [1, 0]
    )  # Item 2 is ahead of 1; 3 leads once 1, 2 are seen.
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_target_ranks(
            queries, table, tf.constant([1, 3]), _ragged([[], []]), "new", 0
        )


def test_non_finite_scores_never_win():
    last = 6
    # The target's own score NaN, +inf or -inf: last, under both rules.
    for bad in (np.nan, np.inf, -np.inf):
        for candidates in CANDIDATES:
            scores = [[0.0, 1.0, bad, 3.0, 2.0, 0.5]]
            assert _ranks(scores, [2], [[]], candidates).tolist() == [last]
    # NaN of other items counts ahead of the target; -inf does not.
    scores = [[0.0, np.nan, 5.0, np.nan, -np.inf, 1.0]]
    assert _ranks(scores, [2], [[]]).tolist() == [2]
    # A NaN model ranks every target last: HR@10 is 0, not 100.
    nan_scores = np.full([3, 12], np.nan, np.float32)
    ranks = _ranks(nan_scores, [1, 2, 3], [[], [], []])
    assert ranks.tolist() == [12, 12, 12]
    accumulator = RankingAccumulator()
    accumulator.update(ranks)
    assert accumulator.result()["HR@10"] == 0.0


def test_repeated_targets_under_both_rules():
    # History [2, 4]; the target 2 repeats it and scores highest.
    scores = [[9.0, 8.0, 7.0, 1.0, 6.0, 2.0]]
    # new: the history is not ranked, so a repeated target is a miss.
    assert _ranks(scores, [2], [[2, 4]], "new").tolist() == [6]
    # all: every item is ranked (only padding is not): item 1 is ahead.
    assert _ranks(scores, [2], [[2, 4]], "all").tolist() == [1]
    # all ranks history items too: item 4 (6.0) is ahead of target 5 (2.0).
    assert _ranks(scores, [5], [[2, 4]], "all").tolist() == [3]
    assert _ranks(scores, [5], [[2, 4]], "new").tolist() == [1]
    with pytest.raises(ValueError, match="candidates"):
        _ranks(scores, [5], [[2]], "some")


def test_both_rules_agree_when_no_target_repeats():
    """Benchmarks without repeats (Beauty, Toys) rank the same under both rules
    whenever the history scores below the target; otherwise `all` can only
    rank a target lower, never higher."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(64, 41)).astype(np.float32)
    targets = rng.integers(1, 41, size=64)
    histories = [
        [int(i) for i in rng.choice(np.delete(np.arange(1, 41), t - 1), 5, False)]
        for t in targets
    ]
    new = _ranks(scores, targets, histories, "new")
    everything = _ranks(scores, targets, histories, "all")
    assert (everything >= new).all()
    for row, seen in enumerate(histories):  # History pushed below every item.
        scores[row, seen] = -100.0
    np.testing.assert_array_equal(
        _ranks(scores, targets, histories, "new"),
        _ranks(scores, targets, histories, "all"),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranks_match_numpy_oracle(seed):
    rng = np.random.default_rng(seed)
    batch, items = 16, 30
    scores = rng.normal(size=(batch, items + 1)).astype(np.float32)
    scores[:, 5] = scores[:, 6]  # Ties.
    targets = rng.integers(1, items + 1, size=batch)
    histories = [
        list(rng.integers(1, items + 1, size=rng.integers(0, 6))) for _ in range(batch)
    ]
    got = target_ranks(
        tf.constant(scores),
        tf.constant(targets),
        tf.ragged.constant(histories, dtype=tf.int64),
    ).numpy()
    np.testing.assert_array_equal(got, numpy_ranks(scores, targets, histories))


def test_hand_computed_rank_and_ties_count_against_the_target():
    scores = tf.constant([[9.0, 1.0, 5.0, 3.0, 5.0, 4.0]])
    # Item 2 (5.0) ties item 4 (5.0); item 5 (4.0) would be ahead of item 3
    # but is seen; padding (9.0) is ignored.
    ranks = target_ranks(scores, tf.constant([2]), tf.ragged.constant([[5]]))
    assert ranks.numpy().tolist() == [1]
    ranks = target_ranks(scores, tf.constant([3]), tf.ragged.constant([[5]]))
    assert ranks.numpy().tolist() == [2]


def test_constant_scores_rank_last():
    ranks = target_ranks(tf.zeros([1, 11]), tf.constant([4]), tf.ragged.constant([[1]]))
    assert ranks.numpy().tolist() == [8]  # 9 unseen items: 8 tie ahead.


def test_metric_values_from_ranks():
    metrics = ranking_metrics(tf.constant([0, 4, 9, 30]), ks=(5, 10))
    np.testing.assert_allclose(metrics["HR@5"], [1, 1, 0, 0])
    np.testing.assert_allclose(metrics["HR@10"], [1, 1, 1, 0])
    ndcg = [1, 1 / np.log2(6), 1 / np.log2(11), 0]
    np.testing.assert_allclose(metrics["NDCG@10"], ndcg, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        metrics["MRR"], [1, 1 / 5, 1 / 10, 1 / 31], rtol=1e-6, atol=1e-6
    )


def test_accumulator_means_in_percent():
    acc = RankingAccumulator(ks=(1,))
    acc.update(np.array([0, 3]))
    acc.update(np.array([0]))
    assert acc.result()["HR@1"] == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="No user"):
        RankingAccumulator().result()


def test_ndcg_gap_bounds_are_tight():
    # Every user counted by HR@10 but not HR@5 at rank 6 (0-based 5), or at 10.
    for rank, which in ((5, 1), (9, 0)):
        acc = RankingAccumulator(ks=(5, 10))
        acc.update(np.array([rank, 0, 50, 50]))
        m = acc.result()
        bounds = ndcg_gap_bounds(m["HR@5"], m["HR@10"])
        assert m["NDCG@10"] - m["NDCG@5"] == pytest.approx(
            bounds[which], rel=1e-6, abs=1e-4
        )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_metrics_of_any_rankings_are_consistent(seed):
    ranks = np.random.default_rng(seed).geometric(0.05, size=500) - 1
    acc = RankingAccumulator(ks=(5, 10))
    acc.update(ranks)
    m = {name: round(value, 2) for name, value in acc.result().items()}
    assert metrics_consistent(m)[0]


def test_paper_rows_that_mix_numbers_are_flagged():
    toys_genni = {"HR@5": 7.18, "HR@10": 9.96, "NDCG@5": 5.15, "NDCG@10": 5.90}
    ok, why = metrics_consistent(toys_genni)
    assert not ok and "0.80 to 0.99" in why
    beauty_genni = {"HR@5": 6.30, "HR@10": 8.79, "NDCG@5": 4.48, "NDCG@10": 5.33}
    assert metrics_consistent(beauty_genni)[0]


@pytest.mark.parametrize("chunk_size", [8192, 1000])
def test_exact_ties_of_real_valued_embeddings_count_against_the_target(chunk_size):
    # Unit-scale floats, 64 dimensions: the matmul of a chunk and the
    # target's own dot product sum in different orders, so scores equal in
    # exact arithmetic differ by an ulp either way. A collapsed model (every
    # item row the same) must rank every target last, as the full-matrix
    # ranking does, and an item with the target's own embedding is a tie.
    rng = np.random.default_rng(0)
    batch, items, dim = 64, 5000, 64
    queries = rng.normal(size=(batch, dim)).astype(np.float32)
    targets = rng.integers(1, items + 1, size=batch)
    no_history = _ragged([[]] * batch)
    collapsed = np.repeat(rng.normal(size=(1, dim)), items + 1, 0).astype(np.float32)
    ranks = chunked_target_ranks(
        queries, collapsed, targets, no_history, "all", chunk_size
    ).numpy()
    np.testing.assert_array_equal(ranks, items - 1)  # Every other item ties.
    # The reference sums each score in the same order (a BLAS matmul need
    # not: OpenBLAS on some CPUs rounds the edge columns of a block apart).
    scores = (queries[:, None, :] * collapsed[None, :, :]).sum(axis=-1)
    full = _ranks(scores, targets, [[]] * batch, "all")
    np.testing.assert_array_equal(full, items - 1)
    # Ten copies of each target's embedding among otherwise distinct items:
    # each copy is a tie, so no target ranks in the top 10.
    table = rng.normal(size=(items + 1, dim)).astype(np.float32)
    targets = np.arange(1, batch + 1) * 50
    for target in targets:
        table[target + 1 : target + 11] = table[target]
    ranks = chunked_target_ranks(
        queries, table, targets, no_history, "all", chunk_size
    ).numpy()
    assert np.all(ranks >= 10)
    # Otherwise the ranks are float64's, give or take the items within
    # float32 rounding of the target's score (padding, row 0, never ranks).
    exact = queries.astype(np.float64) @ table[1:].T.astype(np.float64)
    own = exact[np.arange(batch), targets - 1]
    margin = 1e-2  # Scores of about +-10; float32 rounding ~1e-5.
    assert np.all(ranks >= (exact > own[:, None] + margin).sum(axis=1) + 10)
    assert np.all(ranks <= (exact >= own[:, None] - margin).sum(axis=1) - 1)


def test_left_out_is_padding_and_under_new_the_history_ragged_or_dense():
    ragged = tf.ragged.constant([[3, 5], [], [7]], dtype=tf.int64)
    dense = tf.constant([[3, 5], [0, 0], [7, 0]], tf.int64)  # 0: padding.
    assert metrics.left_out(ragged, "all").to_list() == [[0], [0], [0]]
    assert metrics.left_out(ragged, "new").to_list() == [[0, 3, 5], [0], [0, 7]]
    for history in (ragged, dense):
        masked = metrics.mask_left_out(tf.zeros([3, 9]), history, "new").numpy()
        assert np.isinf(masked).sum(axis=1).tolist() == [3, 1, 2]
        targets = tf.constant([5, 0, 8])
        assert metrics.is_left_out(targets, history, "new").numpy().tolist() == [
            True,
            True,
            False,
        ]
        assert metrics.is_left_out(targets, history, "all").numpy().tolist() == [
            False,
            True,
            False,
        ]

import numpy as np
import pytest
import tensorflow as tf

from components.metrics import (
    RankingAccumulator,
    metrics_consistent,
    ndcg_gap_bounds,
    ranking_metrics,
    target_ranks,
)


def numpy_ranks(scores, targets, histories):
    ranks = []
    for row, target, seen in zip(scores, targets, histories, strict=True):
        row = row.astype(np.float64).copy()
        row[0] = -np.inf
        row[list(seen)] = -np.inf
        if target in seen:
            ranks.append(len(row))
            continue
        ranks.append(int(np.sum(row >= row[target])) - 1)
    return np.array(ranks)


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
    np.testing.assert_allclose(
        metrics["NDCG@10"], [1, 1 / np.log2(6), 1 / np.log2(11), 0], rtol=1e-6
    )
    np.testing.assert_allclose(metrics["MRR"], [1, 1 / 5, 1 / 10, 1 / 31], rtol=1e-6)


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
        assert m["NDCG@10"] - m["NDCG@5"] == pytest.approx(bounds[which], rel=1e-6)


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

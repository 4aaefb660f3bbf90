import collections
import gzip
import itertools

import pytest

from genni.pipeline.preprocess import synthetic


def test_same_seed_same_log_and_another_seed_differs():
    config = synthetic.SyntheticConfig(num_users=50, num_items=30, seed=7)
    assert synthetic.generate_log(config) == synthetic.generate_log(config)
    other = synthetic.SyntheticConfig(num_users=50, num_items=30, seed=8)
    assert synthetic.generate_log(config) != synthetic.generate_log(other)


def test_planted_transitions_and_popularity_skew():
    config = synthetic.SyntheticConfig(num_users=400, num_items=100, seed=1)
    sequences = synthetic.generate_sequences(config)
    assert all(len(s) >= config.min_length for s in sequences)
    pairs = collections.Counter(
        (a, b) for s in sequences for a, b in itertools.pairwise(s)
    )
    follows = collections.defaultdict(collections.Counter)
    for (a, b), n in pairs.items():
        follows[a][b] += n
    # The most frequent successor of an item is far more likely than chance.
    top_share = [
        c.most_common(1)[0][1] / sum(c.values())
        for c in follows.values()
        if sum(c.values()) >= 20
    ]
    assert sum(top_share) / len(top_share) > 0.2
    counts = collections.Counter(i for s in sequences for i in s)
    assert counts.most_common(1)[0][1] > 5 * (sum(counts.values()) / config.num_items)


def test_write_log_gzip(tmp_path):
    config = synthetic.SyntheticConfig(num_users=20, num_items=10, seed=0)
    path = tmp_path / "a" / "log.json.gz"
    n = synthetic.write_log(config, str(path))
    with gzip.open(path, "rt") as f:
        assert len(f.read().splitlines()) == n


def test_bad_config():
    with pytest.raises(ValueError, match="transition_prob"):
        synthetic.SyntheticConfig(transition_prob=1.5)
    with pytest.raises(ValueError, match="mean_length"):
        synthetic.SyntheticConfig(mean_length=2, min_length=5)


def test_sequences_are_those_of_numpys_weighted_choice():
    """The O(log items) popularity draw gives exactly what one
    `rng.choice(items, p=popularity)` per draw gave (the logs of earlier
    versions, and their numbers, stay the same)."""
    import numpy as np

    config = synthetic.SyntheticConfig(num_users=40, num_items=30, seed=7)
    rng = np.random.default_rng(config.seed)
    popularity = 1.0 / np.arange(1, config.num_items + 1) ** config.zipf_exponent
    popularity /= popularity.sum()
    successors = rng.choice(
        config.num_items, size=(config.num_items, config.successors), p=popularity
    )
    extra = rng.poisson(config.mean_length - config.min_length, size=config.num_users)
    expected = []
    for length in config.min_length + extra:
        item = int(rng.choice(config.num_items, p=popularity))
        seq = [item]
        while len(seq) < length:
            if rng.random() < config.transition_prob:
                item = int(successors[item, rng.integers(config.successors)])
            else:
                item = int(rng.choice(config.num_items, p=popularity))
            seq.append(item)
        expected.append(seq)
    assert synthetic.generate_sequences(config) == expected

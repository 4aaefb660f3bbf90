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
    with pytest.raises(ValueError, match="zipf_exponent"):
        synthetic.SyntheticConfig(zipf_exponent=-1)


def test_a_flatter_popularity_touches_more_of_a_large_catalog():
    from genni.pipeline.cli import data, main

    def touched(*flags):
        argv = ["synth", "--output", "x", "--num-users", "300", "--num-items", "5000"]
        args = main.build_parser().parse_args([*argv, *flags])
        config = data.synth_config_from_args(args)
        return len({i for s in synthetic.generate_sequences(config) for i in s})

    assert touched("--zipf-exponent", "0.3") > 1.5 * touched()


def test_sequences_are_those_of_numpys_weighted_choice():
    """The O(log items) popularity draw gives exactly what one
    `rng.choice(items, p=popularity)` per draw gave (the logs of earlier
    versions, and their numbers, stay the same)."""
    import numpy as np

    config = synthetic.SyntheticConfig(num_users=40, num_items=30, seed=7)
    rng = np.random.default_rng(config.seed)
    popularity, successors, extra = synthetic.sequence_law(config, rng)
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


def _valid(lines):
    """The log's parseable reviews, as a multiset."""
    import json

    reviews = collections.Counter()
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "reviewerID" in record and "unixReviewTime" in record:
            reviews[line] += 1
    return reviews


def test_a_streamed_log_has_the_same_reviews_whatever_its_shuffle_block():
    config = synthetic.SyntheticConfig(num_users=60, num_items=30, seed=4)
    whole = synthetic.generate_log(config)
    assert list(synthetic.iter_log(config, shuffle_buffer=len(whole) + 1)) == whole
    blocks = list(synthetic.iter_log(config, shuffle_buffer=50))
    assert blocks != whole
    assert _valid(blocks) == _valid(whole)
    # Each block holds whole users: a user's reviews are all in one block.
    first_block_users = {
        line.split('"reviewerID": "')[1][:8] for line in blocks[:50] if "U0" in line
    }
    assert "U0000000" in first_block_users


def test_the_log_streams_without_generating_every_user_first(tmp_path, monkeypatch):
    # Many users, but the first block of lines needs only its own.
    config = synthetic.SyntheticConfig(num_users=5000, num_items=50, seed=0)
    made = []
    sequences = synthetic.iter_sequences

    def counted(config):
        for seq in sequences(config):
            made.append(len(seq))
            yield seq

    monkeypatch.setattr(synthetic, "iter_sequences", counted)
    first = list(itertools.islice(synthetic.iter_log(config, shuffle_buffer=100), 100))
    assert len(first) == 100 and _valid(first)
    assert sum(made) < 200
    monkeypatch.undo()
    monkeypatch.setattr(synthetic, "PROGRESS_LINES", 100)
    small = synthetic.SyntheticConfig(num_users=30, num_items=20, seed=0)
    path = tmp_path / "log.json"
    seen = []
    n = synthetic.write_log(small, str(path), 10, seen.append)
    assert n == len(path.read_text().splitlines()) > 300
    assert seen == list(range(100, n + 1, 100))

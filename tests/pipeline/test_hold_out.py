"""`genni preprocess --hold-out-items SHARE`: a seeded share of the items held
out of training and validation, met as test targets only, the same from Beam
and in memory, drawn as `../shared/tools/cold_baseline.py` draws them."""

import os
import random

import pytest

from genni.components import schema
from genni.pipeline.preprocess import inmemory, outputs, sequences, synthetic
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training import keys
from tests.pipeline.test_preprocess_e2e import preprocess, read_lines, read_split

SMALL = synthetic.SyntheticConfig(num_users=120, num_items=40, noise_users=0, seed=5)


def test_the_draw_is_the_baselines():
    items = ["10", "2", "33", "4", "5", "61", "7", "8", "9", "1"]
    held = sequences.held_out_items(items, 0.3, 0)
    by_number = sorted(items, key=int)
    expected = random.Random(0).sample(by_number, 3)
    assert {items[i - 1] for i in held} == set(expected)
    # A history without the held-out items, but its last (the test target).
    examples = sequences.split_examples([1, 2, 3, 4, 5, 2], 8, frozenset({2}))
    assert examples[schema.TEST][schema.HISTORY] == [1, 3, 4, 5]
    assert examples[schema.TEST][schema.TARGET] == 2
    assert examples[schema.VALID][schema.TARGET] == 5
    with pytest.raises(ValueError, match="leave-one-out"):
        PreprocessConfig("x", "y", split="time", test_days=7, hold_out_items=0.1)


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("hold")
    log = str(root / "reviews.json.gz")
    synthetic.write_log(SMALL, log)
    beam_out, mem_out, plain = (str(root / n) for n in ("beam", "mem", "plain"))
    flags = ("--max-len", "8", "--hold-out-items", "0.25", "--hold-out-seed", "1")
    assert preprocess(log, beam_out, *flags) == 0
    config = dict(input=log, max_len=8)
    inmemory.run(
        PreprocessConfig(output=mem_out, hold_out_items=0.25, hold_out_seed=1, **config)
    )
    inmemory.run(PreprocessConfig(output=plain, **config))
    return beam_out, mem_out, plain


def test_held_out_items_are_test_targets_only(held_out):
    beam_out, mem_out, plain = held_out
    items = read_lines(os.path.join(beam_out, schema.ITEMS_FILE))
    held = sequences.held_out_items(items, 0.25, 1)
    assert len(held) == len(items) // 4
    for split in (schema.TRAIN, schema.VALID):
        for row in read_split(beam_out, split, 8):
            seen = set(row[schema.HISTORY]) | {row[schema.TARGET]}
            assert not seen & held, split
    test = read_split(beam_out, schema.TEST, 8)
    cold = [r for r in test if r[schema.TARGET] in held]
    assert cold and all(not set(r[schema.HISTORY]) & held for r in cold)
    stats = outputs.read_json(os.path.join(beam_out, schema.STATS_FILE))
    assert stats["hold_out"] == {
        "share": 0.25,
        "seed": 1,
        "drawn_from": len(items),
        "items": len(held),
        "test_targets": len(cold),
    }
    # Beam and in memory alike; the plain dataset is another one.
    assert stats == outputs.read_json(os.path.join(mem_out, schema.STATS_FILE))
    for split in schema.SPLITS:
        assert read_split(beam_out, split, 8) == read_split(mem_out, split, 8)
    assert keys.data_fingerprint(beam_out) != keys.data_fingerprint(plain)


def test_train_reports_cold_and_warm_test_cases(held_out, tmp_path):
    from genni.pipeline.training import train
    from genni.pipeline.training.config import TrainConfig
    from genni.pipeline.training.summary import format_metrics

    _, mem_out, _ = held_out
    stats = outputs.read_json(os.path.join(mem_out, schema.STATS_FILE))
    run = str(tmp_path / "run")
    small = dict(hidden_size=8, num_layers=1, num_heads=1, batch_size=64, epochs=1)
    result = train.train(TrainConfig.of(data=mem_out, output=run, **small), verbose=0)
    by = result["test_by_target"]
    assert by["cold"]["cases"] == by["cold_among_cold"]["cases"]
    assert by["cold"]["cases"] == stats["hold_out"]["test_targets"]
    assert by["cold_items"] == stats["hold_out"]["items"]
    assert by["cold"]["cases"] + by["warm"]["cases"] == stats["examples"]["test"]
    # The three groups are the same rankings: cold and warm make up all.
    for name in ("HR@10", "NDCG@10"):
        mixed = (
            by["cold"][name] * by["cold"]["cases"]
            + by["warm"][name] * by["warm"]["cases"]
        ) / stats["examples"]["test"]
        assert mixed == pytest.approx(result["test"][name], abs=1e-6)
        # Among fewer items a target ranks at least as high.
        assert by["cold_among_cold"][name] >= by["cold"][name] - 1e-9
    assert "test targets never trained on" in format_metrics(result)


def _protocol(sequences_, attrs, share, seed, every_item=False):
    """`../shared/tools/cold_baseline.py`'s content HR@10, as its docstring
    says it (the test's own copy: a fresh clone has no ../shared); with
    `every_item`, the same scores ranked over every item, not the cold ones."""
    import collections

    items = sorted({i for s in sequences_ for i in s}, key=int)
    cold = set(random.Random(seed).sample(items, int(len(items) * share)))
    pop = collections.Counter()
    for s in sequences_:
        for i in s[:-2]:
            if i not in cold:
                pop.update(attrs.get(i, []))
    among = items if every_item else cold
    weight = {i: sum(pop[x] for x in attrs.get(i, [])) for i in among}
    hits = cases = 0
    for s in sequences_:
        if s[-1] not in cold:
            continue
        cases += 1
        seen = collections.Counter(
            x for i in s[:-1] if i not in cold for x in attrs.get(i, [])
        )
        total = sum(seen.values()) or 1
        score = {
            i: sum(seen[x] for x in attrs.get(i, [])) / total + 1e-6 * weight[i]
            for i in among
        }
        rank = sum(1 for i in among if i != s[-1] and score[i] >= score[s[-1]])
        hits += rank < 10
    return 100 * hits / cases, cases


def test_the_content_baseline_follows_the_protocol(tmp_path):
    import json

    from genni.pipeline.training.cold import content_baseline
    from genni.pipeline.training.data import Dataset

    rng = random.Random(4)
    attrs = {
        str(i): [f"c{i % 7}", f"b{i % 5}"] + ([f"x{i % 3}"] if i % 2 else [])
        for i in range(1, 61)
    }
    users = [
        [
            str((u * 3 + j * rng.randint(1, 4)) % 60 + 1)
            for j in range(rng.randint(5, 12))
        ]
        for u in range(300)
    ]
    users = [list(dict.fromkeys(s)) for s in users]
    users = [s for s in users if len(s) >= 3]
    log = tmp_path / "seq.txt"
    log.write_text("".join(f"{n} {' '.join(s)}\n" for n, s in enumerate(users, 1)))
    (tmp_path / "attrs.json").write_text(json.dumps(attrs))
    data = str(tmp_path / "data")
    inmemory.run(
        PreprocessConfig(
            str(log),
            data,
            min_count=1,
            item_attributes=str(tmp_path / "attrs.json"),
            hold_out_items=0.2,
            hold_out_seed=3,
        )
    )
    ours = content_baseline(Dataset.open(data))
    want, cases = _protocol(users, attrs, 0.2, 3)
    assert ours["cases"] == cases
    assert ours["HR@10"] == pytest.approx(want, abs=1e-9)
    every, _ = _protocol(users, attrs, 0.2, 3, every_item=True)
    assert ours["every_item"]["HR@10"] == pytest.approx(every, abs=1e-9)
    assert every < want  # Warm items with the same attributes rank above.
    # What `genni train` and `genni evaluate` report beside a split's cases;
    # no validation case has a held-out target.
    from genni.pipeline.training.cold import by_target_with_baseline

    test = by_target_with_baseline({"cold": {}}, Dataset.open(data), "test")
    assert test == {"cold": {}, "content_baseline": ours}
    assert by_target_with_baseline({}, Dataset.open(data), "valid") == {}

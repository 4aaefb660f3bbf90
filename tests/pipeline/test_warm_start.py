"""`genni train --warm-start RUN` on a grown log: the old items score as they
did, the new ones get rows, and the run records what it started from."""

import os

import numpy as np
import pytest
import tensorflow as tf

from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.training import model, rundir, train, warm_start
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset
from tests.conftest import review

DAY = 86400
MODEL = dict(hidden_size=8, num_layers=1, num_heads=1, batch_size=64)


def lines(users, items, new_items=0):
    out = [
        review(f"u{u}", f"i{(u * 7 + j) % items}", j * DAY + u)
        for u in range(users)
        for j in range(8)
    ]
    out += [
        review(f"n{u}", f"new{(u + j) % new_items}", (20 + j) * DAY + u)
        for u in range(new_items * 3)
        for j in range(6)
    ]
    return out


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """A run on a log, and the same log grown by new users and items,
    preprocessed with --previous."""
    root = tmp_path_factory.mktemp("warm")
    first, second = root / "first.json", root / "second.json"
    first.write_text("\n".join(lines(60, 30)) + "\n")
    second.write_text("\n".join(lines(60, 30, new_items=4)) + "\n")
    old, new = str(root / "old"), str(root / "new")
    inmemory.run(PreprocessConfig(str(first), old, min_count=2, max_len=10))
    inmemory.run(
        PreprocessConfig(str(second), new, min_count=2, max_len=10, previous=old)
    )
    run = str(root / "run")
    train.train(TrainConfig.of(data=old, output=run, epochs=1, **MODEL), verbose=0)
    return run, old, new


@pytest.fixture(scope="module")
def grown_filtermix(grown):
    """`grown`, its run's encoder FilterMix (every weight of another encoder
    carries over too: the filters, their high-frequency rescale)."""
    run, old, new = grown
    other = f"{run}_filtermix"
    config = TrainConfig.of(
        data=old, output=other, epochs=1, **{**MODEL, "encoder": "filtermix"}
    )
    train.train(config, verbose=0)
    return other, old, new


@pytest.mark.parametrize(
    "rows, encoder", [("random", "sasrec"), ("mean", "sasrec"), ("mean", "filtermix")]
)
def test_old_items_score_as_they_did_at_step_zero(request, rows, encoder):
    run, _, new = request.getfixturevalue(
        "grown" if encoder == "sasrec" else f"grown_{encoder}"
    )
    before = model.load_run(run)
    config = TrainConfig.of(
        data=new,
        output="",
        warm_start=run,
        warm_start_rows=rows,
        **{**MODEL, "encoder": encoder},
    )
    dataset = Dataset.open(new)
    after = model.build_model(config, dataset)
    started = warm_start.initialize(after.encoder, config)
    assert (started["items"], started["new_items"]) == (30, 4)
    histories = tf.constant(np.arange(1, 31).reshape(3, 10), tf.int64)
    np.testing.assert_array_equal(
        after(histories).numpy()[:, :31], before(histories).numpy()
    )
    table = after.item_embeddings.numpy()
    old_rows = before.item_embeddings.numpy()[1:]
    is_mean = np.allclose(table[31:], old_rows.mean(axis=0), atol=1e-6)
    assert is_mean == (rows == "mean")


def test_a_warm_started_run_trains_and_records_its_start(grown, tmp_path):
    run, _, new = grown
    output = str(tmp_path / "warm")
    config = TrainConfig.of(data=new, output=output, warm_start=run, epochs=1, **MODEL)
    train.train(config, verbose=0)
    assert rundir.read_json(f"{output}/config.json")["warm_start"] == run


def test_what_cannot_be_warm_started_is_refused(grown, tmp_path):
    run, old, new = grown
    dataset = Dataset.open(new)
    wider = TrainConfig.of(
        data=new, output="", warm_start=run, **{**MODEL, "hidden_size": 16}
    )
    with pytest.raises(ValueError, match="hidden_size 8 vs 16"):
        warm_start.initialize(model.build_model(wider, dataset).encoder, wider)
    other = TrainConfig.of(
        data=new, output="", warm_start=run, **{**MODEL, "encoder": "filtermix"}
    )
    with pytest.raises(ValueError, match="encoder sasrec vs filtermix"):
        warm_start.initialize(model.build_model(other, dataset).encoder, other)
    # A dataset numbered afresh (no --previous) would mix up the items.
    fresh = str(tmp_path / "fresh")
    inmemory.run(
        PreprocessConfig(f"{old}/../second.json", fresh, min_count=2, max_len=10)
    )
    renumbered = TrainConfig.of(data=fresh, output="", warm_start=run, **MODEL)
    built = model.build_model(renumbered, Dataset.open(fresh))
    with pytest.raises(ValueError, match="--previous"):
        warm_start.initialize(built.encoder, renumbered)
    with pytest.raises(ValueError, match="choose one"):
        TrainConfig.of(data=new, output="", warm_start=run, init_from=run)
    with pytest.raises(FileNotFoundError, match="best weights"):
        config = TrainConfig.of(data=new, output="", warm_start=str(tmp_path), **MODEL)
        warm_start.initialize(model.build_model(config, dataset).encoder, config)


def test_a_warm_started_run_is_judged_by_its_own_curve(grown, tmp_path):
    """The step floor holds a fresh run on a log of a few steps an epoch; a
    warm-started one stops on its own curve (issue 66): with a flat curve
    (a rate too small to move a rank) and patience 1, at its second epoch."""
    run, _, new = grown
    flat = dict(
        MODEL,
        data=new,
        epochs=6,
        patience=1,
        patience_growth=0.0,
        min_steps=1000,
        learning_rate=1e-9,
    )
    ran = {}
    for name, start in (("fresh", None), ("warm", run)):
        output = str(tmp_path / name)
        train.train(TrainConfig.of(output=output, warm_start=start, **flat), verbose=0)
        metrics = rundir.read_json(f"{output}/{rundir.METRICS_FILE}")
        ran[name] = (metrics["epochs_run"], metrics["stopped_early"])
    assert ran == {"fresh": (6, False), "warm": (2, True)}


def test_another_loops_run_is_reused_only_on_the_same_ids(grown, tmp_path):
    """A run key is settings and dataset statistics: a dataset of the same log
    numbered afresh (no --previous) has the same statistics, other ids, and
    must not reuse a run of the one that kept them (`genni replay`'s loops)."""
    from genni.pipeline.loop import steps
    from genni.pipeline.training import keys

    _, old, new = grown
    fresh = str(tmp_path / "fresh")
    inmemory.run(
        PreprocessConfig(f"{old}/../second.json", fresh, min_count=2, max_len=10)
    )
    assert keys.data_fingerprint(fresh) == keys.data_fingerprint(new)
    other = tmp_path / "other"
    config = TrainConfig.of(
        data=new, output=str(other / "runs" / "r"), epochs=1, **MODEL
    )
    train.train(config, verbose=0)
    said = []
    for data, reused in ((fresh, False), (new, True)):
        probe = config.replace(data=data, output="")
        key = keys.run_key(probe, keys.data_fingerprint(data))
        runs = str(tmp_path / "mine" / "runs")
        found = steps._reuse(key, data, runs, [str(other)], said.append)
        assert (found is not None) == reused
    assert os.path.islink(found[0]) and os.path.realpath(found[0]) == str(
        other / "runs" / "r"
    )

"""Repeated items end to end: the candidate rule from stats to served top-K,
and non-finite losses that stop a run at its last good checkpoint."""

import os
import types

import numpy as np
import pytest
import tensorflow as tf

from genni.components import losses, schema
from genni.pipeline.cli import main as cli
from genni.pipeline.preprocess import inmemory
from genni.pipeline.preprocess.config import PreprocessConfig
from genni.pipeline.serving import export
from genni.pipeline.training import callbacks as cb
from genni.pipeline.training import rundir, train
from genni.pipeline.training.model import BEST_DIR
from tests.conftest import tiny_config

NUM_USERS, NUM_ITEMS, LENGTH = 300, 30, 8


def write_alternating_log(path, seed=0):
    """Each user alternates two items, a b a b ...: every next item repeats
    the item two steps back, so every valid and test target is a repeat."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for user in range(NUM_USERS):
            a, b = rng.choice(NUM_ITEMS, 2, replace=False)
            items = [f"i{a}", f"i{b}"] * (LENGTH // 2)
            f.write(f"u{user} {' '.join(items)}\n")


@pytest.fixture(scope="module")
def alternating(tmp_path_factory):
    root = tmp_path_factory.mktemp("alternating")
    log = str(root / "log.txt")
    write_alternating_log(log)
    data = str(root / "data")
    stats = inmemory.run(PreprocessConfig(input=log, output=data, max_len=LENGTH))
    return root, data, stats


def _config(data, output, **kwargs):
    values = dict(epochs=4, hidden_size=32, learning_rate=0.01)
    return tiny_config(data, output, **(values | kwargs))


@pytest.fixture(scope="module")
def runs(alternating):
    """One run per rule on the alternating log."""
    root, data, _ = alternating
    return {
        rule: train.train(
            _config(data, root / f"run_{rule}", candidates=rule), verbose=0
        )
        for rule in ("all", "new")
    }


def test_stats_count_the_repeats(alternating):
    _, _, stats = alternating
    repeats = stats["repeats"]
    assert repeats["test_targets"] == stats["users"] == NUM_USERS
    assert repeats["valid_share"] == repeats["test_share"] == 1.0
    # All but each user's first two events repeat.
    assert repeats["events"] == NUM_USERS * (LENGTH - 2)
    assert "repeated items" in cli.format_stats(stats)


def test_all_finds_repeats_and_new_counts_them_as_misses(runs, alternating):
    _, _, stats = alternating
    # Ranked among all items, "two steps back" is learned within a few epochs
    # (random ranking: HR@10 = 10 / 30).
    assert runs["all"]["test"]["HR@10"] > 90.0
    # Under the paper's protocol a repeated target is never found.
    assert runs["new"]["test"]["HR@10"] == 0.0
    for rule, result in runs.items():
        repeats = result["repeats"][schema.TEST]
        assert repeats == {
            "users": stats["users"],
            "repeat_targets": stats["users"],
            "candidates": rule,
        }
        assert result["config"]["candidates"] == rule
    assert "test repeat targets: 300 of 300 (100.0%)" in cli.format_metrics(runs["new"])


def test_new_warns_naming_the_flag(alternating, tmp_path, capsys):
    _, data, _ = alternating
    train.check_dataset(_config(data, tmp_path / "w"), _info(data))
    out = capsys.readouterr().out
    assert "100.0%" in out and "--candidates all" in out
    train.check_dataset(_config(data, tmp_path / "w", candidates="all"), _info(data))
    assert capsys.readouterr().out == ""


def _info(data):
    return schema.DatasetInfo.load(data)


def test_evaluate_takes_the_runs_rule_or_another(alternating, runs):
    root, _, _ = alternating
    run = str(root / "run_all")
    metrics, repeats = train.evaluate(run, None, schema.TEST)
    assert metrics["HR@10"] == pytest.approx(runs["all"]["test"]["HR@10"])
    assert repeats["candidates"] == "all"
    metrics, repeats = train.evaluate(run, None, schema.TEST, "new")
    assert metrics["HR@10"] == 0.0 and repeats["candidates"] == "new"


def _serve(path, histories, k):
    model = tf.saved_model.load(path)
    width = max(len(h) for h in histories)
    padded = [h + [""] * (width - len(h)) for h in histories]
    out = model.signatures[export.SIGNATURE_TOP_K](
        history=tf.constant(padded), k=tf.constant(k, tf.int32)
    )
    ids = [[i.decode() for i in row] for row in out[export.ITEM_IDS].numpy()]
    return ids, out[export.SCORES].numpy(), out[export.NUM_RESULTS].numpy()


def test_the_served_top_k_follows_the_rule(alternating, runs):
    root, data, _ = alternating
    run = str(root / "run_all")
    base = str(root / "models")
    served_all = export.export(run, base, k=5)  # The run's rule: all.
    served_new = export.export(run, base, k=5, candidates="new")
    with open(os.path.join(data, schema.ITEMS_FILE)) as f:
        items = f.read().splitlines()
    with open(os.path.join(data, schema.SEQUENCES_FILE)) as f:
        users = [line.split("\t")[1].split() for line in f.read().splitlines()]
    histories = [seq[:-1] for seq in users[:40]]
    ids, _, _ = _serve(served_all, histories, 5)
    # With "all", the answer (the history item two steps back) is served.
    hits = sum(seq[-1] in top for seq, top in zip(users, ids, strict=False))
    assert hits >= 36
    ids, _, counts = _serve(served_new, histories, 5)
    for history, top in zip(histories, ids, strict=True):
        assert not set(top) & set(history)
    assert (counts == 5).all()
    # A history that covers all but 2 items: 2 real answers, then filler.
    nearly_all = [items[2:]]
    ids, scores, counts = _serve(served_new, nearly_all, 5)
    assert counts.tolist() == [2]
    assert sorted(ids[0][:2]) == sorted(items[:2])
    assert ids[0][2:] == ["", "", ""] and np.isneginf(scores[0][2:]).all()
    assert np.isfinite(scores[0][:2]).all()
    ids, _, counts = _serve(served_new, [items], 3)  # Every item: none left.
    assert counts.tolist() == [0] and ids == [["", "", ""]]
    # Under "all" the same history still gets k real items, never padding.
    ids, _, counts = _serve(served_all, [items], 5)
    assert counts.tolist() == [5] and "" not in ids[0]


@pytest.fixture
def poisoned_loss(monkeypatch):
    """A switch that makes the BCE loss NaN from the next step on."""
    poison = tf.Variable(False)
    original = losses.bce_loss

    def bce_loss(positive_logits, negative_logits):
        loss = original(positive_logits, negative_logits)
        return tf.where(poison, tf.constant(np.nan, loss.dtype), loss)

    monkeypatch.setattr(losses, "bce_loss", bce_loss)
    return poison


def test_a_nan_loss_stops_at_the_last_good_checkpoint_and_resumes(
    alternating, tmp_path, monkeypatch, poisoned_loss
):
    _, data, _ = alternating
    config = _config(data, tmp_path / "run", epochs=3, candidates="all")
    original = train._log_epoch

    def poison_after_epoch_1(writer, record):
        original(writer, record)
        if record["epoch"] == 1:
            poisoned_loss.assign(True)

    monkeypatch.setattr(train, "_log_epoch", poison_after_epoch_1)
    with pytest.raises(train.NonFiniteError, match=r"epoch 2, step 1\b"):
        train.train(config, verbose=0)
    state = rundir.read_json(os.path.join(config.output, train.STATE_FILE))
    assert state["epoch"] == 1 and state["best_epoch"] == 1
    assert not os.path.exists(os.path.join(config.output, train.METRICS_FILE))
    # The run is not left claimed, and --resume continues from epoch 1.
    poisoned_loss.assign(False)
    result = train.train(config, resume=True, verbose=0)
    assert result["epochs_run"] == 3
    assert [r["epoch"] for r in result["history"]] == [1, 2, 3]


@pytest.mark.parametrize("bad_epoch", [1, 2])
def test_non_finite_weights_with_a_finite_loss_never_become_the_best_epoch(
    alternating, tmp_path, monkeypatch, bad_epoch
):
    # The last step of an epoch breaks an item's embedding while the loss is
    # still finite. Its validation would be finite (NaN scores rank targets
    # last), so without a check on the weights that epoch could be
    # checkpointed and, in epoch 1, become best/.
    _, data, _ = alternating
    config = _config(data, tmp_path / "run", epochs=3, candidates="all")
    original = cb.EpochRecord.on_epoch_end

    def break_weights(self, epoch, logs=None):
        original(self, epoch, logs)
        if epoch + 1 == bad_epoch:
            table = self.model.item_embeddings
            table.assign(tf.tensor_scatter_nd_update(table, [[3]], [[np.nan] * 32]))

    monkeypatch.setattr(cb.EpochRecord, "on_epoch_end", break_weights)
    with pytest.raises(
        train.NonFiniteError,
        match=rf"weights became non-finite \(.*embedding.*\) at epoch {bad_epoch}, "
        r"step \d+\.",
    ) as stopped:
        train.train(config, verbose=0)
    best = os.path.join(config.output, BEST_DIR)
    state_path = os.path.join(config.output, train.STATE_FILE)
    if bad_epoch == 1:  # Nothing validated, checkpointed or kept as best.
        assert not os.path.exists(best) and not os.path.exists(state_path)
        assert "No epoch was checkpointed" in str(stopped.value)
    else:
        state = rundir.read_json(state_path)
        assert state["epoch"] == state["best_epoch"] == 1
        assert "checkpoint of epoch 1 is kept" in str(stopped.value)


@pytest.mark.parametrize(
    "patience, growth, min_steps, stopped_at",
    [
        (2, 0.0, None, 7),  # Best at 5: 2 epochs without a better one.
        (2, 0.5, None, 8),  # Best at 5 waits max(2, 2.5) = 2.5 epochs: 3.
        (2, 1.2, None, 10),  # It waits 6 epochs: to the end (10), not stopped.
        # 3 steps an epoch: 7 epochs are 21 steps, under a floor of 25; the
        # first epoch at or over it (9: 27 steps) stops.
        (2, 0.0, 25, 9),
        (2, 0.0, 21, 7),  # A floor already passed changes nothing.
    ],
)
def test_patience_grows_with_the_best_epoch(
    tmp_path, patience, growth, min_steps, stopped_at
):
    curve = [1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 4.5, 4.9, 3.0, 4.0]
    progress = cb.Progress(train._initial_state())
    scores = iter(curve)
    validation = cb.Validation(
        progress,
        lambda model: {"HR@10": 50.0, "NDCG@10": next(scores)},
        str(tmp_path / "best" / "weights"),
        every=1,
        patience=patience,
        epochs=len(curve),
        verbose=0,
        patience_growth=growth,
        min_steps=min_steps,
    )
    model = tf.Module()  # What the best weights are written from.
    model.stop_training = False
    model.optimizer = types.SimpleNamespace(iterations=0)
    validation.set_model(model)
    epoch = 0
    while epoch < len(curve) and not model.stop_training:
        model.optimizer.iterations = 3 * (epoch + 1)
        validation.on_epoch_end(epoch)
        epoch += 1
    assert progress.state["best_epoch"] == 5
    assert epoch == stopped_at
    assert progress.state["stopped_early"] == (stopped_at < len(curve))


def test_a_non_finite_validation_metric_stops_the_run(
    alternating, tmp_path, monkeypatch
):
    _, data, _ = alternating
    config = _config(data, tmp_path / "run", epochs=2, candidates="all")
    calls = []

    def nan_on_second_call(self, model):
        calls.append(1)
        return {"HR@10": 50.0, "NDCG@10": np.nan if len(calls) == 2 else 10.0}

    monkeypatch.setattr(train.Evaluator, "__call__", nan_on_second_call)
    with pytest.raises(train.NonFiniteError, match="NDCG@10 non-finite at epoch 2"):
        train.train(config, verbose=0)
    state = rundir.read_json(os.path.join(config.output, train.STATE_FILE))
    assert state["best_epoch"] == 1 and state["epoch"] == 1


def test_exclude_seen_refuses_data_of_the_old_schema(alternating, tmp_path):
    _, data, _ = alternating
    old = schema.DatasetInfo.load(data)
    old = schema.DatasetInfo(**{**old.__dict__, "schema_version": 1})
    with pytest.raises(ValueError, match="genni preprocess"):
        train.check_dataset(
            _config(data, tmp_path / "x", exclude_seen=True, candidates="all"), old
        )

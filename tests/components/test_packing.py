"""Packed batches: same examples, same encoder outputs, same loss, less work."""

import numpy as np
import pytest
import tensorflow as tf

from genni.components import packing, schema
from genni.models.config import EncoderConfig, build_encoder
from genni.models.encoders import registry
from genni.models.encoders.sasrec import SASRecEncoder
from genni.models.retrieval import SequentialRetrievalModel
from genni.pipeline.training import data, train
from tests.conftest import make_dataset, tiny_config

# Float32 sums of unit-scale terms: oneDNN and Eigen add them in different
# orders, so compare with an absolute part too.
ATOL = 1e-5


def left_padded(lengths, width, num_items, seed):
    rng = np.random.default_rng(seed)
    ids = np.zeros([len(lengths), width], np.int64)
    targets = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        if length:
            ids[row, width - length :] = rng.integers(1, num_items + 1, length)
            targets[row, width - length :] = rng.integers(1, num_items + 1, length)
    return ids, targets


def unpack(packed, batch, width):
    """The left-padded batch back from the packed rows."""
    ids, targets, positions, segments, users = packed
    out_ids = np.zeros([batch, width], np.int64)
    out_targets = np.zeros_like(out_ids)
    real = segments > 0
    out_ids[users[real], positions[real]] = ids[real]
    out_targets[users[real], positions[real]] = targets[real]
    return out_ids, out_targets


def test_pack_rows_round_trips_and_fits_rows():
    lengths = [7, 1, 3, 10, 0, 4, 6, 2, 10, 5]
    ids, targets = left_padded(lengths, 10, 30, seed=0)
    packed = packing.pack_rows(ids, targets)
    p_ids, _, positions, segments, users = packed
    # 48 tokens in rows of 10: first-fit decreasing needs 5 rows, not 10.
    assert p_ids.shape == (5, 10)
    back_ids, back_targets = unpack(packed, len(lengths), 10)
    np.testing.assert_array_equal(back_ids, ids)
    np.testing.assert_array_equal(back_targets, targets)
    for row in range(len(p_ids)):
        real = segments[row] > 0
        # Real tokens first, padding after; each segment contiguous and of
        # one example, its positions increasing by one.
        assert not np.any(real[np.argmin(real) :]) or real.all()
        for segment in set(segments[row][real]):
            columns = np.flatnonzero(segments[row] == segment)
            assert np.all(np.diff(columns) == 1)
            assert len(set(users[row, columns])) == 1
            assert np.all(np.diff(positions[row, columns]) == 1)
            assert positions[row, columns[-1]] == 9  # Ends at the last column.


@pytest.mark.parametrize("kind", registry.names())
def test_packed_encoder_outputs_equal_unpacked(kind):
    width, num_items = 12, 40
    lengths = [12, 3, 5, 1, 8, 2, 4, 6]
    ids, targets = left_padded(lengths, width, num_items, seed=1)
    encoder = build_encoder(EncoderConfig(
        num_items, kind, max_len=16, hidden_size=16, num_heads=2, dropout=0.0,
        attention_dropout=0.0, seed=0,
    ))  # fmt: skip
    unpacked = encoder(ids).numpy()
    p_ids, _, positions, segments, users = packing.pack_rows(ids, targets)
    assert len(p_ids) < len(ids)
    packed = encoder(p_ids, positions=positions, segments=segments).numpy()
    real = segments > 0
    np.testing.assert_allclose(
        packed[real], unpacked[users[real], positions[real]], rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("loss", ["softmax", "bce"])
def test_packed_loss_equals_unpacked(loss):
    width, num_items = 10, 30
    ids, targets = left_padded([10, 2, 4, 7, 3, 1], width, num_items, seed=2)
    encoder = SASRecEncoder(
        num_items, max_len=width, hidden_size=8, num_heads=2, dropout=0.0,
        attention_dropout=0.0, seed=0,
    )  # fmt: skip
    # The same (user, position) pairs: the softmax loss is the same, and for
    # BCE (negatives drawn in another order) the positives' mean score is.
    from genni.components.samplers import UniformSampler

    sampler = UniformSampler(num_items, 1, seed=0)
    model = SequentialRetrievalModel(encoder, sampler, loss=loss)
    features = {schema.INPUT_IDS: ids, schema.TARGET_IDS: targets}
    p_ids, p_targets, positions, segments, users = packing.pack_rows(ids, targets)
    packed = {
        schema.INPUT_IDS: p_ids,
        schema.TARGET_IDS: p_targets,
        packing.POSITIONS: positions,
        packing.SEGMENTS: segments,
        packing.TOKEN_USERS: users,
    }
    plain = float(model.compute_loss(features))
    plain_positive = float(model.positive_score.result())
    model.positive_score.reset_state()
    packed_loss = float(model.compute_loss(packed))
    assert float(model.positive_score.result()) == pytest.approx(
        plain_positive, rel=1e-5, abs=ATOL
    )
    if loss == "softmax":
        assert packed_loss == pytest.approx(plain, rel=1e-5, abs=ATOL)


def test_packed_dataset_and_training(tmp_path):
    data_dir, stats = make_dataset(
        tmp_path, num_users=300, num_items=80, seed=4, max_len=10
    )
    info = schema.DatasetInfo.load(data_dir)
    records = data.records(data_dir, schema.TRAIN)
    plain = list(data.train_dataset(records, info.max_len, 64, 0, 0))
    packed = list(data.train_dataset(records, info.max_len, 64, 0, 0, pack=True))
    assert len(plain) == len(packed)
    for a, b in zip(plain, packed, strict=True):
        # The same examples per batch, in fewer rows.
        assert int(tf.reduce_sum(tf.cast(a[schema.TARGET_IDS] > 0, tf.int32))) == int(
            tf.reduce_sum(tf.cast(b[schema.TARGET_IDS] > 0, tf.int32))
        )
        assert b[schema.INPUT_IDS].shape[0] < a[schema.INPUT_IDS].shape[0]
        np.testing.assert_array_equal(
            a[schema.USER_ITEMS].to_tensor(), b[schema.USER_ITEMS].to_tensor()
        )
    config = tiny_config(
        data_dir,
        tmp_path / "run",
        epochs=5,
        hidden_size=16,
        learning_rate=0.005,
        exclude_seen=True,
        pack=True,
    )
    result = train.train(config, verbose=0)
    assert result["test"]["HR@10"] > 2 * 100 * 10 / stats["items"]
    # Evaluation on packed batches ranks as the unpacked one does.
    model = train.load_run(config.output)
    dataset = data.Dataset.open(data_dir)
    for split in (schema.VALID, schema.TEST):
        plain = train.Evaluator(dataset, split)(model)
        packed = train.Evaluator(dataset, split, pack=True)(model)
        assert packed == pytest.approx(plain, abs=1e-3)
    assert result["test"] == pytest.approx(
        train.Evaluator(dataset, schema.TEST)(model), abs=1e-3
    )

"""S3-Rec pre-training objectives, masking and the weight hand-over."""

import math

import numpy as np
import pytest
import tensorflow as tf

from genni.components.samplers import UniformSampler
from genni.models import s3rec
from genni.models.encoders.sasrec import SASRecEncoder
from genni.pipeline.training import pretrain

# Float32 sums of unit-scale terms: oneDNN and Eigen add them in different
# orders, so compare with an absolute part too.
ATOL = 1e-5

LOG2 = math.log(2.0)


def test_attribute_loss_matches_hand_computed_bce():
    logits = tf.constant([[9.0, 1.0, -2.0, 0.5], [9.0, 0.0, 3.0, -1.0]])
    ids = tf.constant([[1, 3], [2, 0]], tf.int64)  # Row 2 has one attribute.
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    expected = (
        -math.log(1 / (1 + math.exp(-1.0)))
        + softplus(-2.0)
        - math.log(1 / (1 + math.exp(-0.5)))
        + softplus(0.0)
        - math.log(1 / (1 + math.exp(-3.0)))
        + softplus(-1.0)
    )  # Column 0 (padding) never counts.
    got = s3rec.attribute_loss(logits, ids, num_attributes=3)
    assert float(got) == pytest.approx(expected, rel=1e-6, abs=ATOL)


def test_pairwise_loss_matches_hand_computed_values():
    got = s3rec.pairwise_loss(
        tf.constant([2.0, 0.0]), tf.constant([[1.0, 3.0], [0.0, 0.0]])
    )
    expected = 0.5 * (math.log1p(math.exp(-1.0)) + math.log1p(math.exp(1.0))) + LOG2
    assert float(got) == pytest.approx(expected, rel=1e-6, abs=ATOL)


def _model(num_items=6, max_len=5, attributes=None, weights=None):
    encoder = SASRecEncoder(
        num_items,
        max_len,
        hidden_size=8,
        num_layers=1,
        num_heads=2,
        dropout=0.0,
        attention_dropout=0.0,
        seed=1,
        name="sasrec",
    )
    if attributes is None:
        attributes = np.array([[0, 0], [1, 2], [2, 0], [3, 0], [1, 3], [2, 3], [4, 0]])
    model = s3rec.S3RecPretrainer(
        encoder,
        attributes,
        int(attributes.max()),
        UniformSampler(num_items, seed=0),
        weights=weights,
        seed=1,
    )
    return model


def _features(sequence, masked, segment, negative=None):
    sequence = tf.constant(sequence, tf.int64)
    return {
        s3rec.SEQUENCE: sequence,
        s3rec.MASKED: tf.constant(masked),
        s3rec.SEGMENT: tf.constant(segment),
        s3rec.NEGATIVE_SEGMENT: tf.zeros_like(sequence)
        if negative is None
        else tf.constant(negative, tf.int64),
    }


def test_each_objective_counts_exactly_its_positions():
    # With every head zeroed, each term is log 2 per scored (position, label):
    # AAP: unmasked real positions x A attributes; MAP: masked positions x A;
    # MIP: masked positions; SP: sequences with at least 2 items.
    model = _model()
    features = _features(
        sequence=[[0, 0, 1, 2, 3], [0, 0, 0, 0, 4], [5, 6, 1, 2, 3]],
        masked=[
            [True, False, True, False, True],  # Padding marked: ignored.
            [False, False, False, False, True],
            [False, True, False, False, True],
        ],
        segment=[
            [False, False, False, True, False],
            [False, False, False, False, True],
            [False, False, True, True, False],
        ],
        negative=[[0, 0, 0, 4, 0], [0, 0, 0, 0, 1], [0, 0, 5, 6, 0]],
    )
    model(features)
    for head in model.heads.values():
        for weight in head.weights:
            weight.assign(tf.zeros_like(weight))
    terms = model.objectives(features)
    a = model.num_attributes
    assert a == 4
    unmasked_real, masked = 1 + 0 + 3, 2 + 1 + 2
    assert float(terms["aap"]) == pytest.approx(
        unmasked_real * a * LOG2, rel=1e-5, abs=ATOL
    )
    assert float(terms["map"]) == pytest.approx(masked * a * LOG2, rel=1e-5, abs=ATOL)
    assert float(terms["mip"]) == pytest.approx(masked * LOG2, rel=1e-5, abs=ATOL)
    assert float(terms["sp"]) == pytest.approx(
        2 * LOG2, rel=1e-5, abs=ATOL
    )  # Row 2 has 1 item.
    loss, _ = model.compute_loss_terms(features)
    expected = (
        sum(s3rec.DEFAULT_WEIGHTS[n] * float(terms[n]) for n in s3rec.OBJECTIVES) / 3
    )
    assert float(loss) == pytest.approx(expected, rel=1e-5, abs=ATOL)


def test_objectives_react_to_their_labels():
    # AAP of an item falls when the attribute embeddings align with the head's
    # output for its attributes: check the gradient reaches only real labels.
    model = _model()
    features = _features([[0, 0, 0, 1, 4]], [[False] * 4 + [True]], [[False] * 5])
    model(features)
    with tf.GradientTape() as tape:
        terms = model.objectives(features)
    grads = tape.gradient(terms["aap"], model.attribute_embedding.embeddings)
    grads = tf.convert_to_tensor(grads).numpy()
    assert np.allclose(grads[0], 0.0)  # The padding attribute is never scored.
    assert not np.allclose(grads[1:], 0.0)


def test_epoch_features_never_mask_padding():
    sequences = [np.array([1, 2, 3, 4, 5, 6]), np.array([7, 8]), np.array([9])]
    rows = pretrain.prefixes(sequences, max_len=4)
    assert rows.shape == (7, 4)  # Prefixes of the last 4 items: 4 + 2 + 1.
    assert rows[0].tolist() == [0, 0, 0, 3] and rows[3].tolist() == [3, 4, 5, 6]
    assert rows[4].tolist() == [0, 0, 0, 7]
    long = np.concatenate(sequences)
    for epoch in range(5):
        f = pretrain.epoch_features(rows, long, 0.5, seed=3, epoch=epoch)
        real = f[s3rec.SEQUENCE] > 0
        assert not (f[s3rec.MASKED] & ~real).any()
        assert f[s3rec.MASKED][:, -1].all()  # The last item is always masked.
        assert not (f[s3rec.SEGMENT] & ~real).any()
        lengths = real.sum(1)
        spans = f[s3rec.SEGMENT].sum(1)
        assert (spans[lengths < 2] == 0).all()
        assert ((spans >= 1) & (spans <= lengths // 2))[lengths >= 2].all()
        negative = f[s3rec.NEGATIVE_SEGMENT]
        assert ((negative > 0) == f[s3rec.SEGMENT]).all()
        # Same (seed, epoch), same features: resumable.
        again = pretrain.epoch_features(rows, long, 0.5, seed=3, epoch=epoch)
        assert all((again[k] == f[k]).all() for k in f)


def test_encoder_weights_round_trip_and_refuse_mismatches(tmp_path):
    model = _model()
    model(_features([[0, 0, 0, 1, 2]], [[False] * 5], [[False] * 5]))
    path = str(tmp_path / "encoder.npz")
    s3rec.save_encoder_weights(model.encoder, path)
    names = sorted(s3rec.encoder_weights(model.encoder))
    assert "items/embeddings" in names and "block_0/query/kernel" in names

    fresh = SASRecEncoder(6, 5, hidden_size=8, num_layers=1, num_heads=2, seed=9)
    fresh(tf.zeros([1, 5], tf.int64))
    assert s3rec.load_encoder_weights(fresh, path) == names
    for name, weight in s3rec.encoder_weights(fresh).items():
        np.testing.assert_array_equal(
            weight.numpy(), s3rec.encoder_weights(model.encoder)[name].numpy()
        )

    deeper = SASRecEncoder(6, 5, hidden_size=8, num_layers=2, num_heads=2)
    deeper(tf.zeros([1, 5], tf.int64))
    with pytest.raises(ValueError, match=r"missing from the file: \['block_1/"):
        s3rec.load_encoder_weights(deeper, path)
    other_catalog = SASRecEncoder(9, 5, hidden_size=8, num_layers=1, num_heads=2)
    other_catalog(tf.zeros([1, 5], tf.int64))
    with pytest.raises(ValueError, match=r"shapes differ.*items/embeddings"):
        s3rec.load_encoder_weights(other_catalog, path)
    values = dict(np.load(path))
    values["extra/kernel"] = np.zeros(3)
    np.savez(str(tmp_path / "extra.npz"), **values)
    with pytest.raises(ValueError, match=r"not in the model: \['extra/kernel'\]"):
        s3rec.load_encoder_weights(fresh, str(tmp_path / "extra.npz"))


def test_leading_padding_changes_no_objective():
    model = _model(max_len=8)
    narrow = _features(
        [[0, 1, 2, 3], [5, 6, 1, 2]],
        [[False, True, False, True], [False, False, True, True]],
        [[False, False, True, False], [False, True, True, False]],
        [[0, 0, 4, 0], [0, 3, 5, 0]],
    )
    wide = {
        k: tf.concat([tf.zeros([2, 4], v.dtype), v], axis=1) for k, v in narrow.items()
    }
    a, b = model.objectives(narrow), model.objectives(wide)
    for name in ("aap", "map", "sp"):  # MIP draws fresh negatives per call.
        assert float(a[name]) == pytest.approx(float(b[name]), rel=1e-5, abs=ATOL), name


def test_batches_group_sequences_of_like_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 51, size=5000)
    order = pretrain.shuffled_order(lengths, 100, np.random.default_rng(1))
    assert sorted(order.tolist()) == list(range(5000))  # A permutation.
    spread = [np.ptp(lengths[order[i : i + 100]]) for i in range(0, 5000, 100)]
    assert max(spread) <= 5  # Random batches of 100 would span about 48.

"""FilterMix's causal filter against hand-computed values, its start, its
limits (alpha 0 is SASRec), and S3-Rec pre-training of its filters."""

import numpy as np
import pytest
import tensorflow as tf

from genni.components.samplers import UniformSampler
from genni.models import s3rec
from genni.models.encoders.filtermix import (
    FilterMixBlock,
    FilterMixEncoder,
    filter_inputs,
    initial_filter,
)
from genni.models.encoders.sasrec import SASRecEncoder, attention_bias

# Float32 sums of unit-scale terms (oneDNN and Eigen add in other orders).
ATOL = 1e-5


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _pass_inputs(allowed: np.ndarray, max_len: int) -> dict:
    """The block's inputs beside x, as FilterMixEncoder makes them."""
    allowed = tf.constant(allowed)
    return {"bias": attention_bias(allowed), **filter_inputs(allowed, max_len)}


def test_the_filter_equals_a_hand_computed_one():
    # One head over 2 channels, lags 0..3; a row of 3 positions, the first
    # one padding (a padding position reads only itself).
    block = FilterMixBlock(2, 1, dropout=0.0, attention_dropout=0.0, max_len=4)
    x = np.array([[[9.0, -9.0], [1.0, 2.0], [3.0, -1.0]]], np.float32)
    allowed = np.array([[[[1, 0, 0], [0, 1, 0], [0, 1, 1]]]], np.float32)
    inputs = _pass_inputs(allowed, max_len=4)
    block(tf.constant(x), **inputs)  # Builds its weights.
    block.filter_logits.assign([[0.5, -1.0, 2.0, 0.0]])  # w[lag]
    block.sqrt_beta.assign([2.0, 0.5])

    lags, bias = inputs["lags"], inputs["filter_bias"]
    got = block.filtered(tf.constant(x), lags, bias, False).numpy()[0]

    # Row 2 reads positions 1 (lag 1) and 2 (lag 0), never the padding.
    w = _softmax(np.array([-1.0, 0.5]))
    low = np.stack([x[0, 0], x[0, 1], w[0] * x[0, 1] + w[1] * x[0, 2]])
    mixed = low + np.array([4.0, 0.25]) * (x[0] - low)
    summed = mixed + x[0]
    mean = summed.mean(axis=-1, keepdims=True)
    var = summed.var(axis=-1, keepdims=True)
    expected = (summed - mean) / np.sqrt(var + 1e-12)  # LayerNorm at its start.
    np.testing.assert_allclose(got, expected, atol=ATOL)
    weights = block.filter_weights(lags, bias).numpy()[0, 0]
    np.testing.assert_allclose(weights[2], [0.0, w[0], w[1]], atol=1e-6)


def test_the_filter_starts_as_a_moving_average():
    logits = initial_filter(num_heads=2, max_len=6, window=3)
    assert logits.shape == (2, 6)
    np.testing.assert_array_equal(logits[:, :3], 0.0)
    block = FilterMixBlock(4, 2, max_len=6, filter_window=3)
    inputs = _pass_inputs(np.tril(np.ones([6, 6], np.float32))[None, None], 6)
    block(tf.zeros([1, 6, 4]), **inputs)
    weights = block.filter_weights(inputs["lags"], inputs["filter_bias"]).numpy()[0]
    # Position 5 reads 3, 4 and 5 about equally, earlier ones about e^-6 as much.
    np.testing.assert_allclose(weights[:, 5, 3:], 1 / 3, atol=0.02)
    assert (weights[:, 5, :3] < 0.01).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-6)


def test_alpha_zero_is_sasrec_and_alpha_one_needs_no_attention():
    ids = tf.constant([[0, 0, 4, 2, 7, 1]])
    settings = dict(hidden_size=8, num_heads=2, dropout=0.0, attention_dropout=0.0)
    sasrec = SASRecEncoder(9, 6, seed=3, **settings)
    mixed = FilterMixEncoder(9, 6, seed=3, filter_alpha=0.0, **settings)
    np.testing.assert_allclose(mixed(ids).numpy(), sasrec(ids).numpy(), atol=ATOL)
    filter_only = FilterMixEncoder(9, 6, seed=3, filter_alpha=1.0, **settings)
    assert filter_only(ids).shape == (1, 6, 8)
    assert not any("query" in w.name for w in filter_only.trainable_weights)


@pytest.mark.parametrize(
    "kwargs, message",
    [(dict(filter_alpha=1.5), "filter_alpha"), (dict(filter_window=0), "window")],
)
def test_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FilterMixEncoder(9, 6, hidden_size=8, num_heads=2, **kwargs)


def test_s3rec_pretraining_trains_the_filters_and_hands_them_over(tmp_path):
    encoder = FilterMixEncoder(
        6, 5, hidden_size=8, num_layers=1, num_heads=2, seed=1, name="filtermix"
    )
    attributes = np.array([[0, 0], [1, 2], [2, 0], [3, 0], [1, 3], [2, 3], [4, 0]])
    model = s3rec.S3RecPretrainer(
        encoder, attributes, 4, UniformSampler(6, seed=0), seed=1
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(0.05))
    sequence = tf.constant([[0, 1, 2, 3, 4], [2, 5, 6, 1, 3]], tf.int64)
    features = {
        s3rec.SEQUENCE: sequence,
        s3rec.MASKED: tf.constant([[False, True, False, True, False]] * 2),
        s3rec.SEGMENT: tf.constant([[False, False, True, True, False]] * 2),
        s3rec.NEGATIVE_SEGMENT: tf.constant([[0, 0, 5, 6, 0]] * 2, tf.int64),
    }
    model(features)
    names = s3rec.encoder_weights(encoder)
    assert "block_0/filter_logits" in names and "block_0/sqrt_beta" in names
    before = names["block_0/filter_logits"].numpy().copy()
    for _ in range(3):
        model.train_step(features)
    assert not np.allclose(names["block_0/filter_logits"].numpy(), before)

    path = str(tmp_path / "encoder.npz")
    s3rec.save_encoder_weights(encoder, path)
    fresh = FilterMixEncoder(6, 5, hidden_size=8, num_layers=1, num_heads=2, seed=9)
    fresh(tf.zeros([1, 5], tf.int64))
    s3rec.load_encoder_weights(fresh, path)
    np.testing.assert_allclose(fresh(sequence).numpy(), encoder(sequence).numpy())

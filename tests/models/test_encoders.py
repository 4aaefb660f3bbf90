"""Every registered encoder keeps the protocol (`genni.models.encoders`):
shapes, the shared table, causality at every position, padding, dropout,
serialization and the narrow-input property. Each test runs once per
encoder."""

import numpy as np
import pytest
import tensorflow as tf

from genni.models.config import EncoderConfig, build_encoder
from genni.models.encoders import SequenceEncoder, registry
from genni.models.encoders.sasrec import CausalSelfAttentionBlock, SASRecEncoder

V, T, D = 30, 6, 8


@pytest.fixture(params=registry.names())
def make_encoder(request):
    """A builder of the registered encoder `request.param` (tiny, seeded)."""

    def make(**kwargs):
        settings = dict(num_items=V, max_len=T, hidden_size=D, num_layers=2)
        settings = settings | dict(num_heads=2, seed=0) | kwargs
        return build_encoder(EncoderConfig(encoder=request.param, **settings))

    return make


def _encoder(**kwargs):
    defaults = dict(num_items=V, max_len=T, hidden_size=D, num_layers=2, num_heads=2)
    return SASRecEncoder(**(defaults | kwargs), seed=kwargs.pop("seed", 0))


def test_call_shapes_and_shared_table(make_encoder):
    encoder = make_encoder()
    out = encoder(tf.constant([[0, 0, 1, 2, 3, 4]]))
    assert out.shape == (1, T, D)
    assert encoder.item_embeddings.shape == (V + 1, D)
    assert isinstance(encoder, SequenceEncoder)
    assert encoder.name in registry.names()  # Its weights carry its name.


def _changes_after(encoder, length=T, seed=0):
    """Per position t: the largest change of any output at positions <= t
    when only the items after t change (packed and unpacked inputs)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(1, V + 1, size=[2, length])
    worst = []
    for t in range(length - 1):
        other = base.copy()
        other[:, t + 1 :] = rng.integers(1, V + 1, size=[2, length - t - 1])
        a = encoder(tf.constant(base)).numpy()
        b = encoder(tf.constant(other)).numpy()
        worst.append(float(np.abs(a[:, : t + 1] - b[:, : t + 1]).max()))
        assert not np.allclose(a[:, t + 1 :], b[:, t + 1 :])  # Later ones do.
    return worst


def test_causal_output_at_t_ignores_later_items(make_encoder):
    encoder = make_encoder(dropout=0.0, attention_dropout=0.0)
    a = tf.constant([[0, 3, 4, 5, 6, 7]])
    b = tf.constant([[0, 3, 4, 9, 10, 11]])  # Differs from position 3 on.
    out_a, out_b = encoder(a).numpy(), encoder(b).numpy()
    np.testing.assert_allclose(out_a[:, :3], out_b[:, :3], atol=1e-6)
    assert not np.allclose(out_a[:, 3:], out_b[:, 3:])
    # At every position t: changing the item at t + 1 (and later) leaves
    # every output at positions <= t as it was.
    assert max(_changes_after(encoder)) < 1e-5


class _GlobalFFTFilter(tf.keras.layers.Layer):
    """BSARec's filter as published: a low-pass over the whole sequence by
    rfft / irfft, which reads later positions."""

    def call(self, x, bias, training=False):
        del bias, training
        spectrum = tf.signal.rfft(tf.transpose(x, [0, 2, 1]))  # (B, d, T//2+1)
        keep = tf.cast(tf.range(tf.shape(spectrum)[-1]) < 2, spectrum.dtype)
        low = tf.signal.irfft(spectrum * keep, fft_length=[tf.shape(x)[1]])
        return x + tf.transpose(low, [0, 2, 1])


class _GlobalFFTEncoder(SASRecEncoder):
    def make_block(self, seed, name):
        return _GlobalFFTFilter(name=name)


def test_the_causality_check_catches_a_global_fft_filter():
    encoder = _GlobalFFTEncoder(V, T, hidden_size=D, num_heads=2, seed=0)
    assert max(_changes_after(encoder)) > 1e-3


def test_padding_items_do_not_change_real_positions(make_encoder):
    encoder = make_encoder(dropout=0.0, attention_dropout=0.0)
    ids = tf.constant([[0, 0, 0, 5, 6, 7]])
    a = encoder(ids).numpy()
    # Other vectors in the padded slots change no real position's output...
    vectors = encoder.item_embedding(ids)
    noise = tf.random.stateless_normal([1, 3, D], [0, 1])
    b = encoder(ids, item_vectors=tf.concat([noise, vectors[:, 3:]], axis=1)).numpy()
    np.testing.assert_allclose(a[:, 3:], b[:, 3:], atol=1e-6)
    assert not np.allclose(a[:, :3], b[:, :3])  # (The padded outputs do change.)
    # ...and a real item there does change the later outputs.
    c = encoder(tf.constant([[0, 0, 9, 5, 6, 7]])).numpy()
    assert not np.allclose(a[:, 3:], c[:, 3:])


def test_dropout_only_in_training(make_encoder):
    encoder = make_encoder()
    x = tf.constant([[0, 1, 2, 3, 4, 5]])
    np.testing.assert_allclose(encoder(x).numpy(), encoder(x).numpy())
    assert not np.allclose(
        encoder(x, training=True).numpy(), encoder(x, training=True).numpy()
    )


def test_weights_differ_between_projections():
    encoder = _encoder()
    encoder(tf.constant([[1, 2, 3, 4, 5, 6]]))
    block = encoder.blocks[0]
    assert not np.allclose(block.query.kernel.numpy(), block.key.kernel.numpy())


def test_serialization_and_model_saving(tmp_path, make_encoder):
    encoder = make_encoder(dropout=0.1, attention_dropout=0.2, num_layers=1)
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(encoder))
    assert clone.get_config() == encoder.get_config()
    block = CausalSelfAttentionBlock(8, 2, 0.1, 0.2, seed=3)
    assert (
        tf.keras.layers.deserialize(tf.keras.layers.serialize(block)).get_config()
        == block.get_config()
    )
    inputs = tf.keras.Input([T], dtype=tf.int64)
    model = tf.keras.Model(inputs, encoder(inputs))
    x = np.array([[0, 1, 2, 3, 4, 5]])
    expected = model.predict(x, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(hidden_size=6, num_heads=4), "multiple of `num_heads`"),
        (dict(dropout=1.0), "dropout"),
        (dict(num_layers=0), "num_layers"),
    ],
)
def test_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _encoder(**kwargs)


def test_leading_padding_columns_can_be_cut_away(make_encoder):
    encoder = make_encoder(dropout=0.0, attention_dropout=0.0)
    full = encoder(tf.constant([[0, 0, 0, 5, 6, 7], [0, 0, 1, 2, 3, 4]])).numpy()
    narrow = encoder(tf.constant([[0, 5, 6, 7], [1, 2, 3, 4]])).numpy()
    np.testing.assert_allclose(full[:, 2:], narrow, atol=1e-6)
    # Bidirectional attention (pre-training) keeps the same property.
    full = encoder(tf.constant([[0, 0, 0, 5, 6, 7]]), causal=False).numpy()
    narrow = encoder(tf.constant([[5, 6, 7]]), causal=False).numpy()
    np.testing.assert_allclose(full[:, 3:], narrow, atol=1e-6)

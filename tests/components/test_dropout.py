import numpy as np
import pytest
import tensorflow as tf

from genni.components.dropout import CheckpointedDropout


def test_call_drops_and_rescales_only_in_training():
    layer = CheckpointedDropout(0.5, seed=0)
    x = tf.ones([1000])
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())
    out = layer(x, training=True).numpy()
    assert set(np.unique(out)) <= {0.0, 2.0}
    assert 0.4 < np.mean(out == 0.0) < 0.6


def test_checkpoint_restores_the_random_stream(tmp_path):
    layer = CheckpointedDropout(0.3, seed=1)
    x = tf.ones([64])
    layer(x, training=True)
    path = tf.train.Checkpoint(layer=layer).write(str(tmp_path / "d"))
    expected = layer(x, training=True).numpy()
    layer(x, training=True)  # Moves the stream on.
    tf.train.Checkpoint(layer=layer).read(path).assert_consumed()
    np.testing.assert_array_equal(layer(x, training=True).numpy(), expected)


def test_serialization_and_predict_in_a_model():
    layer = CheckpointedDropout(0.25, seed=2)
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert clone.get_config() == layer.get_config()
    inputs = tf.keras.Input([3])
    model = tf.keras.Model(inputs, layer(inputs))
    np.testing.assert_array_equal(model.predict(np.ones([2, 3]), verbose=0), 1.0)
    with pytest.raises(ValueError, match="rate"):
        CheckpointedDropout(1.0)

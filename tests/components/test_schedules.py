import pytest
import tensorflow as tf

from genni.components.schedules import SelfAdjustingAlpha, beta_for_epoch, growing_beta


def test_growing_beta():
    assert growing_beta(0, 20) == pytest.approx(0.001)
    assert growing_beta(20, 20) == pytest.approx(0.01)
    assert growing_beta(40, 20) == pytest.approx(0.1)
    assert growing_beta(60, 20) == 1.0
    assert growing_beta(100, 20) == 1.0
    assert beta_for_epoch(7, 0.3, None) == 0.3
    with pytest.raises(ValueError, match="`m`"):
        growing_beta(1, 0)


def test_self_adjusting_alpha_follows_the_loss():
    alpha = tf.Variable(0.15)
    curriculum = SelfAdjustingAlpha(step=0.1)
    trace = []
    for loss in [5.0, 4.0, 3.0, 3.5, 3.6, 3.7, 3.0]:
        trace.append(round(float(curriculum(alpha, tf.constant(loss))), 4))
    # First batch records only; better -> +0.1; worse -> -0.1, floored at 0.
    assert trace == [0.15, 0.25, 0.35, 0.25, 0.15, 0.05, 0.15]
    curriculum(alpha, tf.constant(9.0))
    curriculum(alpha, tf.constant(9.5))
    assert float(alpha) == 0.0


def test_serialization():
    layer = SelfAdjustingAlpha(step=0.02)
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert clone.get_config() == layer.get_config()
    with pytest.raises(ValueError, match="step"):
        SelfAdjustingAlpha(step=0)

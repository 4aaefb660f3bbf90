import numpy as np
import pytest
import tensorflow as tf

from genni.components import losses


def test_bce_hand_computed():
    # pos 0 -> -log(0.5) = 0.6931; negs 0 and log(3) -> -log(0.5) - log(0.25)
    pos = tf.constant([0.0, np.log(3.0)])
    neg = tf.constant([[0.0, np.log(3.0)], [0.0, 0.0]])
    row0 = np.log(2) + np.log(2) + np.log(4)
    row1 = -np.log(0.75) + 2 * np.log(2)
    assert float(losses.bce_loss(pos, neg)) == pytest.approx((row0 + row1) / 2, 1e-5)


def test_bpr_hand_computed():
    pos = tf.constant([1.0])
    neg = tf.constant([[1.0, 1.0 - np.log(3.0)]])
    # margins 0 and log 3: -log(0.5) and -log(0.75), averaged.
    expected = (np.log(2) - np.log(0.75)) / 2
    assert float(losses.bpr_loss(pos, neg)) == pytest.approx(expected, 1e-5)


def test_softmax_ignores_padding_column():
    logits = tf.constant([[100.0, 0.0, 0.0, np.log(2.0)]])
    # Padding (column 0) is masked: p(target 3) = 2 / (1 + 1 + 2).
    value = float(losses.softmax_loss(logits, tf.constant([3])))
    assert value == pytest.approx(-np.log(0.5), 1e-5)


def test_losses_are_large_when_negatives_outscore_positives():
    good = losses.bce_loss(tf.constant([5.0]), tf.constant([[-5.0]]))
    bad = losses.bce_loss(tf.constant([-5.0]), tf.constant([[5.0]]))
    assert float(good) < 0.02 < 10 < float(bad)

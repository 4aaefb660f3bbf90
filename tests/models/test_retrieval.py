import numpy as np
import pytest
import tensorflow as tf

from genni.components import schema
from genni.components.samplers import GenNiSampler, PopularitySampler, UniformSampler
from genni.models.config import EncoderConfig, build_encoder
from genni.models.retrieval import SequentialRetrievalModel

V, T = 25, 5


def _features():
    return {
        schema.INPUT_IDS: tf.constant([[0, 0, 1, 2, 3], [4, 5, 6, 7, 8]], tf.int64),
        schema.TARGET_IDS: tf.constant([[0, 0, 2, 3, 9], [5, 6, 7, 8, 10]], tf.int64),
        schema.USER_ITEMS: tf.ragged.constant(
            [[1, 2, 3, 9], [4, 5, 6, 7, 8, 10]], tf.int64
        ),
    }


def _model(sampler, encoder="sasrec", **kwargs):
    encoder = build_encoder(
        EncoderConfig(V, encoder, T, hidden_size=8, num_layers=1, num_heads=2, seed=0)
    )
    model = SequentialRetrievalModel(encoder, sampler, **kwargs)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01))
    return model


@pytest.mark.parametrize(
    "encoder, sampler, kwargs",
    [
        ("sasrec", UniformSampler(V, 2, seed=0), {}),
        ("sasrec", UniformSampler(V, 2, seed=0, exclude_seen=True), {"loss": "bpr"}),
        (
            "sasrec",
            PopularitySampler(V, [1.0] * (V + 1), 1.0, 2, seed=0, exclude_seen=True),
            {},
        ),
        ("sasrec", GenNiSampler(V, 2, seed=0, exclude_seen=True), {}),
        ("sasrec", GenNiSampler(V, 2, alpha=2.0, seed=0), {"alpha_step": 0.1}),
        ("sasrec", None, {"loss": "softmax"}),
        # FilterMix under GenNi's negatives with the corrected sampled softmax
        # (the recommended preset), the paper's BCE, and the full softmax.
        (
            "filtermix",
            GenNiSampler(V, 4, alpha=1.0, seed=0),
            {"loss": "sampled_softmax"},
        ),
        ("filtermix", GenNiSampler(V, 1, alpha=2.5, seed=0), {}),
        ("filtermix", None, {"loss": "softmax"}),
    ],
)
def test_training_lowers_the_loss(encoder, sampler, kwargs):
    model = _model(sampler, encoder, **kwargs)
    features = _features()
    first = float(model.compute_loss(features))
    step = tf.function(model.train_step)  # As `fit` runs it.
    for _ in range(30):
        step(features)
    assert float(model.compute_loss(features)) < first


def test_scores_cover_the_catalog_and_use_the_shared_table():
    model = _model(UniformSampler(V, seed=0))
    scores = model(tf.constant([[0, 0, 1, 2, 3]]))
    assert scores.shape == (1, V + 1)
    h = model.query_embeddings(tf.constant([[0, 0, 1, 2, 3]]))
    want = (h @ tf.transpose(model.item_embeddings)).numpy()
    np.testing.assert_allclose(scores.numpy(), want, rtol=1e-5, atol=1e-5)


def test_self_adjusting_alpha_moves_alpha():
    sampler = GenNiSampler(V, 1, alpha=1.0, seed=0)
    model = _model(sampler, alpha_step=0.5)
    for _ in range(4):
        model.train_step(_features())
    assert float(sampler.alpha.numpy()) != 1.0
    assert float(sampler.alpha.numpy()) >= 0.0


@pytest.mark.parametrize(
    "sampler, kwargs, message",
    [
        (None, {}, "needs a sampler"),
        (UniformSampler(V), {"loss": "hinge"}, "`loss`"),
        (UniformSampler(V), {"alpha_step": 0.1}, "with an alpha"),
    ],
)
def test_errors(sampler, kwargs, message):
    with pytest.raises(ValueError, match=message):
        _model(sampler, **kwargs)

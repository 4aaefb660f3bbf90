"""Negative samplers: uniform, popularity and GenNi (model-generated negatives).

Every sampler is a Keras layer with the same protocol (`base`):

    sampler.setup(data)   # what it needs of the training data
    ids, log_q = sampler.negatives(queries, targets, item_embeddings, context,
                                   log_q=True)

`queries` [N, d] are the encoder outputs h_t at the N non-padding positions,
`targets` [N] the positive item ids (1..num_items), `item_embeddings`
[num_items + 1, d] the shared table (row 0 is padding), `context` the batch
(`BatchContext`: the user's items, each position's input item). The result is
[N, k] item ids in 1..num_items, never the row's target, and their log Q.
Randomness comes from a `tf.random.Generator` owned by the layer, so it is
checkpointed with the model and a resumed run draws what an uninterrupted one
would have.

Callers build samplers by name through the one registry (`registry`,
`build_sampler`) from their settings (`config.SamplerConfig`); the layer
classes load with TensorFlow on first use, so the registry's names are known
without it.
"""

import importlib

from genni.components.samplers import registry
from genni.components.samplers.config import SamplerConfig
from genni.components.samplers.registry import build_sampler

_CLASSES = {
    "BatchContext": "base",
    "NegativeSampler": "base",
    "UniformSampler": "uniform",
    "PopularitySampler": "popularity",
    "GenNiSampler": "genni",
}


def __getattr__(name: str):
    if name in _CLASSES:
        module = importlib.import_module(f"{__name__}.{_CLASSES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BatchContext",
    "GenNiSampler",
    "NegativeSampler",
    "PopularitySampler",
    "SamplerConfig",
    "UniformSampler",
    "build_sampler",
    "registry",
]

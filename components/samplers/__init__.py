"""Negative samplers: uniform, popularity and GenNi (model-generated negatives).

Every sampler is a Keras layer with the same call:

    negatives = sampler(queries, targets, item_embeddings, exclude=None)

`queries` [N, d] are the encoder outputs h_t at the N non-padding positions,
`targets` [N] the positive item ids (1..num_items), `item_embeddings`
[num_items + 1, d] the shared table (row 0 is padding), `exclude` an optional
ragged [N, None] of item ids a row must not draw. The result is [N, k] item ids
in 1..num_items, never the row's target. Randomness comes from a
`tf.random.Generator` owned by the layer, so it is checkpointed with the model
and a resumed run draws what an uninterrupted one would have.
"""

from genni.components.samplers.base import NegativeSampler
from genni.components.samplers.genni import GenNiSampler
from genni.components.samplers.popularity import PopularitySampler
from genni.components.samplers.uniform import UniformSampler

SAMPLERS = {
    "uniform": UniformSampler,
    "popularity": PopularitySampler,
    "genni": GenNiSampler,
}

__all__ = [
    "SAMPLERS",
    "GenNiSampler",
    "NegativeSampler",
    "PopularitySampler",
    "UniformSampler",
]

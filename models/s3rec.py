"""S3-Rec pre-training of the SASRec encoder with item attributes.

Four self-supervised objectives over the same encoder and item embeddings that
`genni train` fine-tunes (S3-Rec, Zhou et al. 2020, as in its public code):

- AAP, associated attribute prediction: the output at an unmasked position
  predicts the attributes of its item (BCE over all attributes).
- MIP, masked item prediction: the output at a masked position ranks the
  hidden item above a sampled negative (-log sigmoid(pos - neg)); the
  negatives come from the project's samplers (uniform by default).
- MAP, masked attribute prediction: the output at a masked position predicts
  the attributes of the hidden item.
- SP, segment prediction: the sequence with a segment masked, read at its last
  position, ranks the true segment above a segment of another sequence.

Pre-training attends in both directions (no causal mask), as S3-Rec does; the
mask token is a learned vector of this model, not a row of the item table, so
the encoder's weights move to `genni train` one to one (`save_encoder_weights`
and `load_encoder_weights`, which refuse any missing, extra or misshapen
weight). Each objective is summed over its positions and divided by the batch
size, so the weights trade them off as in the reference code.
"""

from __future__ import annotations

import io

import numpy as np
import tensorflow as tf

from genni.components import losses, schema
from genni.components.samplers.base import BatchContext, NegativeSampler
from genni.models.encoders import SequenceEncoder
from genni.models.encoders.sasrec import INITIALIZER_STDDEV

# The S3-Rec code's defaults (run_pretrain.py).
DEFAULT_WEIGHTS = {"aap": 0.2, "mip": 1.0, "map": 1.0, "sp": 0.5}
DEFAULT_MASK_PROBABILITY = 0.2
OBJECTIVES = ("aap", "mip", "map", "sp")

# Features of a pre-training batch (made by `genni.pipeline.training.pretrain`).
SEQUENCE = "sequence"  # [B, T] item ids, left-padded.
MASKED = "masked"  # [B, T] bool: positions hidden behind the mask token.
SEGMENT = "segment"  # [B, T] bool: the span of the segment to predict.
NEGATIVE_SEGMENT = "negative_segment"  # [B, T] ids of another segment at the span.


def attribute_loss(
    logits: tf.Tensor, attribute_ids: tf.Tensor, num_attributes: int
) -> tf.Tensor:
    """Summed BCE of attribute logits against the item's attributes.

    Args:
        logits: [N, num_attributes + 1]; column 0 (padding) is ignored.
        attribute_ids: [N, L] the item's attribute ids, 0-padded.
        num_attributes: A.

    Returns:
        sum_n [ sum_{a=1..A} softplus(x_na) - sum_{a in attrs(n)} x_na ], the
        binary cross-entropy with labels 1 at the item's attributes.
    """
    real = logits[:, 1 : num_attributes + 1]
    positive = tf.gather(logits, attribute_ids, batch_dims=1)  # (N, L)
    positive = tf.where(attribute_ids > 0, positive, tf.zeros_like(positive))
    return tf.reduce_sum(tf.nn.softplus(real)) - tf.reduce_sum(positive)


def pairwise_loss(positive: tf.Tensor, negative: tf.Tensor) -> tf.Tensor:
    """sum_n mean_j -log sigmoid(positive_n - negative_nj); negative [N, k]."""
    margins = positive[:, None] - negative
    return tf.reduce_sum(tf.reduce_mean(tf.nn.softplus(-margins), axis=-1))


class S3RecPretrainer(tf.keras.Model):
    """The four S3-Rec objectives on a `SASRecEncoder`.

    Args:
        encoder: the encoder to pre-train (the one `genni train` builds).
        item_attributes: [num_items + 1, L] attribute ids (1..A) per item,
            0-padded; row 0 is padding.
        num_attributes: A.
        sampler: draws the MIP negatives (uniform: over items outside the
            sequence with `exclude_seen`, as the reference code; GenNi: from
            the model).
        weights: objective -> weight (`DEFAULT_WEIGHTS` by default).
        seed: seed of the initializers.
    """

    def __init__(
        self,
        encoder: SequenceEncoder,
        item_attributes: np.ndarray,
        num_attributes: int,
        sampler: NegativeSampler,
        weights: dict[str, float] | None = None,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        unknown = sorted(set(weights) - set(OBJECTIVES))
        if unknown:
            raise ValueError(f"Unknown objectives {unknown}; known: {OBJECTIVES}.")
        if any(w < 0 for w in weights.values()):
            raise ValueError(f"Objective weights must be non-negative. Got {weights}.")
        item_attributes = np.asarray(item_attributes, dtype=np.int64)
        if item_attributes.ndim != 2 or len(item_attributes) != encoder.num_items + 1:
            raise ValueError(
                f"`item_attributes` must be [num_items + 1, L] = "
                f"[{encoder.num_items + 1}, L]. Got {item_attributes.shape}."
            )
        if num_attributes < 1 or item_attributes.max(initial=0) > num_attributes:
            raise ValueError(
                f"Attribute ids must run 1..num_attributes ({num_attributes})."
            )
        self.encoder = encoder
        self.sampler = sampler
        self.num_attributes = num_attributes
        self.objective_weights = {
            name: float(weights.get(name, 0.0)) for name in OBJECTIVES
        }
        self.item_attributes = tf.constant(item_attributes)
        d = encoder.hidden_size

        def init(offset: int) -> tf.keras.initializers.Initializer:
            return tf.keras.initializers.TruncatedNormal(
                stddev=INITIALIZER_STDDEV, seed=None if seed is None else seed + offset
            )

        self.attribute_embedding = tf.keras.layers.Embedding(
            num_attributes + 1, d, embeddings_initializer=init(1), name="attributes"
        )
        self.mask_token = self.add_weight(
            name="mask_token", shape=[d], initializer=init(2), trainable=True
        )
        self.heads = {
            name: tf.keras.layers.Dense(
                d, kernel_initializer=init(3 + i), name=f"{name}_head"
            )
            for i, name in enumerate(OBJECTIVES)
        }
        self.trackers = {
            name: tf.keras.metrics.Mean(name) for name in ("loss", *OBJECTIVES)
        }

    @property
    def metrics(self) -> list:
        return list(self.trackers.values())

    def _vectors(self, ids: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
        """Item embeddings of `ids` where `keep`, the mask token elsewhere."""
        vectors = tf.gather(self.encoder.item_embeddings, ids)
        return tf.where(keep[..., None], vectors, self.mask_token)

    def objectives(self, features: dict, training: bool = False) -> dict:
        """Each objective's sum over the batch (not yet weighted)."""
        sequence = tf.cast(features[SEQUENCE], tf.int64)
        lengths = tf.reduce_sum(tf.cast(sequence > schema.PADDING_ID, tf.int32), 1)
        # Only the columns holding a real item in some row matter: the encoder
        # counts positions from the right, so leading padding is cut away.
        width = tf.maximum(tf.reduce_max(lengths), 1)

        def cut(x: tf.Tensor) -> tf.Tensor:
            return x[:, tf.shape(x)[1] - width :]

        sequence = cut(sequence)
        masked = cut(tf.cast(features[MASKED], tf.bool))
        segment = cut(tf.cast(features[SEGMENT], tf.bool))
        negative_segment = cut(tf.cast(features[NEGATIVE_SEGMENT], tf.int64))
        real = sequence > schema.PADDING_ID
        masked = tf.logical_and(masked, real)  # Padding is never a masked item.
        outputs = self.encoder(
            sequence,
            training=training,
            causal=False,
            item_vectors=self._vectors(sequence, tf.logical_not(masked)),
        )  # (B, T, d)
        if not self.attribute_embedding.built:
            self.attribute_embedding.build(None)
        attributes = self.attribute_embedding.embeddings  # (A + 1, d)
        result = {}

        def attribute_objective(head: str, where: tf.Tensor) -> tf.Tensor:
            queries = self.heads[head](tf.boolean_mask(outputs, where))
            logits = tf.matmul(queries, attributes, transpose_b=True)
            ids = tf.gather(self.item_attributes, tf.boolean_mask(sequence, where))
            return attribute_loss(logits, ids, self.num_attributes)

        result["aap"] = attribute_objective(
            "aap", tf.logical_and(real, tf.logical_not(masked))
        )
        result["map"] = attribute_objective("map", masked)

        # MIP: the hidden item against sampled negatives.
        queries = self.heads["mip"](tf.boolean_mask(outputs, masked))  # (N, d)
        positives = tf.boolean_mask(sequence, masked)  # (N,)
        table = self.encoder.item_embeddings
        context = BatchContext(  # The sequence's items, for `exclude_seen`.
            user_items=lambda: tf.gather(
                tf.ragged.boolean_mask(sequence, real), tf.where(masked)[:, 0]
            )
        )
        negatives, _ = self.sampler.negatives(queries, positives, table, context)
        positive_logits, negative_logits = losses.sampled_logits(
            queries, table, positives, negatives
        )
        result["mip"] = pairwise_loss(positive_logits, negative_logits)

        # SP: three encodings in one call, read at the last position.
        rows = lengths >= 2  # Shorter sequences have no segment to predict.
        inside = tf.logical_and(segment, real)
        batch = tf.shape(sequence)[0]
        vectors = tf.concat(
            [
                self._vectors(sequence, tf.logical_and(real, tf.logical_not(inside))),
                self._vectors(sequence, inside),
                self._vectors(negative_segment, inside),
            ],
            axis=0,
        )
        encoded = self.encoder(
            tf.tile(sequence, [3, 1]),
            training=training,
            causal=False,
            item_vectors=vectors,
        )[:, -1, :]  # (3B, d)
        context = self.heads["sp"](encoded[:batch])
        positive = tf.reduce_sum(context * encoded[batch : 2 * batch], -1)
        negative = tf.reduce_sum(context * encoded[2 * batch :], -1)
        result["sp"] = pairwise_loss(
            tf.boolean_mask(positive, rows), tf.boolean_mask(negative, rows)[:, None]
        )
        return result

    def compute_loss_terms(self, features: dict, training: bool = False):
        terms = self.objectives(features, training=training)
        batch = tf.cast(tf.shape(features[SEQUENCE])[0], tf.float32)
        loss = tf.add_n([self.objective_weights[n] * terms[n] for n in OBJECTIVES])
        return loss / batch, {n: t / batch for n, t in terms.items()}

    def call(self, features: dict, training: bool = False) -> tf.Tensor:
        return self.compute_loss_terms(features, training=training)[0]

    def train_step(self, features: dict) -> dict[str, tf.Tensor]:
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        with tf.GradientTape() as tape:
            loss, terms = self.compute_loss_terms(features, training=True)
            # Replica gradients are summed: average them.
            scaled = loss / replicas if replicas > 1 else loss
        variables = self.trainable_variables
        gradients = tape.gradient(scaled, variables)
        self.optimizer.apply_gradients(
            (g, v) for g, v in zip(gradients, variables, strict=True) if g is not None
        )
        self.trackers["loss"].update_state(loss)
        for name, value in terms.items():
            self.trackers[name].update_state(value)
        return {name: m.result() for name, m in self.trackers.items()}


def encoder_weights(encoder: SequenceEncoder) -> dict[str, tf.Variable]:
    """The encoder's trainable weights by layer path ("block_0/query/kernel")."""
    found: dict[str, tf.Variable] = {}

    def visit(layer: tf.keras.layers.Layer, prefix: str) -> None:
        for weight in layer._trainable_weights:  # The layer's own weights.
            short = weight.name.split("/")[-1].split(":")[0]
            found[f"{prefix}{short}"] = weight
        for child in layer._flatten_layers(include_self=False, recursive=False):
            visit(child, f"{prefix}{child.name}/")

    visit(encoder, "")
    return found


def save_encoder_weights(encoder: SequenceEncoder, path: str) -> None:
    """Write the encoder's weights (by layer path) to an .npz file."""
    values = {name: w.numpy() for name, w in encoder_weights(encoder).items()}
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    with tf.io.gfile.GFile(f"{path}.tmp", "wb") as f:
        f.write(buffer.getvalue())
    tf.io.gfile.rename(f"{path}.tmp", path, overwrite=True)


def load_encoder_weights(
    encoder: SequenceEncoder, path: str, skip: str | None = None
) -> list[str]:
    """Assign the weights saved by `save_encoder_weights`; returns their names.
    `skip`: the prefix of the encoder's weights the file need not hold (they
    are left as they are).

    Raises ValueError, naming them, when a weight is missing from the file,
    the file holds a weight the encoder lacks, or a shape differs.
    """
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path} not found: run `genni pretrain` first.")
    with tf.io.gfile.GFile(path, "rb") as f:
        content = f.read()
    with np.load(io.BytesIO(content)) as saved:
        values = {name: saved[name] for name in saved.files}
    weights = encoder_weights(encoder)
    if skip:
        weights = {n: w for n, w in weights.items() if not n.startswith(skip)}
    missing = sorted(set(weights) - set(values))
    extra = sorted(set(values) - set(weights))
    shapes = sorted(
        f"{n} {tuple(values[n].shape)} vs {tuple(weights[n].shape)}"
        for n in set(weights) & set(values)
        if tuple(values[n].shape) != tuple(weights[n].shape)
    )
    if missing or extra or shapes:
        problems = []
        if missing:
            problems.append(f"missing from the file: {missing}")
        if extra:
            problems.append(f"not in the model: {extra}")
        if shapes:
            problems.append(f"shapes differ (file vs model): {shapes}")
        raise ValueError(
            f"Pre-trained weights in {path} do not fit this model ("
            + "; ".join(problems)
            + "). Use the same dataset and model settings as `genni pretrain`."
        )
    for name, weight in weights.items():
        weight.assign(values[name])
    return sorted(weights)

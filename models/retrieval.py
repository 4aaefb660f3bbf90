"""The TFRS retrieval model: an encoder's query tower, shared item embeddings, GenNi.

Query tower: a sequence encoder (`genni.models.encoders`: SASRec, FilterMix),
h_t at every position. Candidate tower: the encoder's own item vectors, its
ID rows or, with an item tower (`genni.models.item_tower`), ID rows plus
attributes. Score: h_t . e_i. `compute_loss` draws k negatives per
non-padding position with the configured sampler and applies the
loss (BCE or BPR with the negatives, or the full softmax as a reference).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_recommenders as tfrs

from genni.components import losses, packing, schema
from genni.components.samplers.base import BatchContext, NegativeSampler
from genni.components.schedules import SelfAdjustingAlpha
from genni.models.encoders import SequenceEncoder


class SequentialRetrievalModel(tfrs.Model):
    """A sequence encoder trained with sampled (or generated) negatives.

    Args:
        encoder: the query tower; its item table is the candidate tower.
        sampler: draws negatives; ignored by the softmax loss.
        loss: "bce", "bpr", "softmax" or "sampled_softmax".
        logq_correction: under "sampled_softmax", subtract log(k Q) of each
            negative (Q: the sampler's draw probability).
        alpha_step: if set, the sampler's alpha self-adjusts by this step
            (a sampler whose draws follow the model's scores has one:
            `alpha_variable`).

    The model asks its sampler through the protocol alone
    (`NegativeSampler.negatives` with the batch's `BatchContext`), so it
    works with any sampler and names none.
    """

    def __init__(
        self,
        encoder: SequenceEncoder,
        sampler: NegativeSampler | None,
        loss: str = "bce",
        logq_correction: bool = True,
        alpha_step: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if loss not in losses.LOSSES:
            raise ValueError(f"`loss` must be one of {losses.LOSSES}. Got {loss!r}.")
        if loss != "softmax" and sampler is None:
            raise ValueError(f"The {loss!r} loss needs a sampler.")
        if alpha_step is not None and (
            sampler is None or sampler.alpha_variable() is None
        ):
            raise ValueError("A self-adjusting alpha needs a sampler with an alpha.")
        self.encoder = encoder
        self.sampler = sampler
        self.loss_name = loss
        self.logq_correction = logq_correction
        self.curriculum = None if alpha_step is None else SelfAdjustingAlpha(alpha_step)
        self.positive_score = tf.keras.metrics.Mean("positive_score")
        self.negative_score = tf.keras.metrics.Mean("negative_score")
        self.alpha_metric = tf.keras.metrics.Mean("alpha")
        self.mean_loss = tf.keras.metrics.Mean("mean_loss")

    @property
    def item_embeddings(self) -> tf.Variable:
        return self.encoder.item_embeddings

    def query_embeddings(
        self, input_ids: tf.Tensor, item_table: tf.Tensor | None = None
    ) -> tf.Tensor:
        """[B, T] ids -> [B, d] h at the last position (inference mode).

        `item_table`: the item vectors (`item_embeddings`) when the caller
        holds them already: an item tower then does not compute them again.
        """
        return self.encoder(
            input_ids, training=False, item_vectors=_lookup(item_table, input_ids)
        )[:, -1, :]

    def packed_call(self, packed: dict, batch_size: tf.Tensor) -> tf.Tensor:
        """`call` of the unpacked batch, from its packed form."""
        return self._score_all(self.packed_query_embeddings(packed, batch_size))

    def packed_query_embeddings(
        self,
        packed: dict,
        batch_size: tf.Tensor,
        item_table: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """[batch_size, d] h at each example's last item, from a packed batch.

        `packed` as `genni.components.packing.pack_inputs` makes it; equal to
        `query_embeddings` of the unpacked batch (an example with no items
        gets zeros). `item_table` as in `query_embeddings`.
        """
        outputs = self.encoder(
            packed[schema.INPUT_IDS],
            training=False,
            item_vectors=_lookup(item_table, packed[schema.INPUT_IDS]),
            positions=packed[packing.POSITIONS],
            segments=packed[packing.SEGMENTS],
        )
        indices, examples = packing.last_tokens(packed)
        return tf.scatter_nd(
            examples[:, None],
            tf.gather_nd(outputs, indices),
            tf.stack([tf.cast(batch_size, tf.int64), tf.shape(outputs, tf.int64)[2]]),
        )

    def call(self, input_ids: tf.Tensor) -> tf.Tensor:
        """Scores of every item ([B, num_items + 1]) for the next position."""
        return self._score_all(self.query_embeddings(input_ids))

    def _score_all(self, queries: tf.Tensor) -> tf.Tensor:
        return tf.matmul(queries, self.item_embeddings, transpose_b=True)

    def train_step(self, features: dict) -> dict[str, tf.Tensor]:
        """As `tfrs.Model.train_step`, reporting only this model's metrics."""
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        with tf.GradientTape() as tape:
            loss = self.compute_loss(features, training=True)
            total_loss = loss + tf.add_n([tf.constant(0.0), *self.losses])
            if replicas > 1:  # Replica gradients are summed: average them.
                total_loss = total_loss / replicas
        gradients = tape.gradient(total_loss, self.trainable_variables)
        self.optimizer.apply_gradients(
            zip(gradients, self.trainable_variables, strict=True)
        )
        return {m.name: m.result() for m in self.metrics if m.name != "alpha"} | (
            {"alpha": self.alpha_metric.result()} if self._alpha is not None else {}
        )

    @property
    def _alpha(self) -> tf.Variable | None:
        """The sampler's alpha, if its draws follow the model's scores."""
        return None if self.sampler is None else self.sampler.alpha_variable()

    def compute_loss(self, features: dict, training: bool = False) -> tf.Tensor:
        table, item_vectors = None, None
        if getattr(self.encoder, "item_tower", None) is not None:
            # One draw of the item vectors a step: the same at the input and
            # as candidates (`genni.models.item_tower`).
            table = self.encoder.item_table(training)
            item_vectors = tf.gather(
                table, tf.cast(features[schema.INPUT_IDS], tf.int64)
            )
        outputs = self.encoder(
            features[schema.INPUT_IDS],
            training=training,
            item_vectors=item_vectors,
            positions=features.get(packing.POSITIONS),
            segments=features.get(packing.SEGMENTS),
        )
        targets = tf.cast(features[schema.TARGET_IDS], tf.int64)
        at_target = targets > schema.PADDING_ID  # (B, T)
        queries = tf.boolean_mask(outputs, at_target)  # (N, d)
        positives = tf.boolean_mask(targets, at_target)  # (N,)
        if table is None:
            table = self.item_embeddings
        if self.loss_name == "softmax":
            logits = tf.matmul(queries, table, transpose_b=True)  # (N, V + 1)
            loss = losses.softmax_loss(logits, positives)
            self.mean_loss.update_state(loss)
            self.positive_score.update_state(tf.gather(logits, positives, batch_dims=1))
            return loss
        context = BatchContext(
            user_items=lambda: _user_items(features, at_target),
            # Each position's input item (GenNi's successor candidates).
            previous=lambda: tf.boolean_mask(features[schema.INPUT_IDS], at_target),
        )
        uses_log_q = self.loss_name == "sampled_softmax" and self.logq_correction
        negatives, log_q = self.sampler.negatives(
            queries, positives, table, context, log_q=uses_log_q
        )
        positive_logits, negative_logits = losses.sampled_logits(
            queries, table, positives, negatives
        )  # (N,), (N, k)
        if self.loss_name == "bce":
            loss = losses.bce_loss(positive_logits, negative_logits)
        elif self.loss_name == "bpr":
            loss = losses.bpr_loss(positive_logits, negative_logits)
        else:
            loss = losses.sampled_softmax_loss(positive_logits, negative_logits, log_q)
        self.mean_loss.update_state(loss)
        self.positive_score.update_state(positive_logits)
        self.negative_score.update_state(negative_logits)
        if self._alpha is not None:
            if training and self.curriculum is not None:
                self.curriculum(self._alpha, _global_mean(loss))
            self.alpha_metric.update_state(self._alpha)
        return loss


def _lookup(item_table: tf.Tensor | None, ids: tf.Tensor) -> tf.Tensor | None:
    """The rows of `ids` in `item_table` (None without a table)."""
    if item_table is None:
        return None
    return tf.gather(item_table, tf.cast(ids, tf.int64))


def _user_items(features: dict, at_target: tf.Tensor) -> tf.RaggedTensor:
    """The items of each target position's user: ragged [N, None]."""
    if packing.TOKEN_USERS in features:  # Packed: each token's example.
        rows = tf.boolean_mask(features[packing.TOKEN_USERS], at_target)
    else:
        rows = tf.where(at_target)[:, 0]
    return tf.gather(features[schema.USER_ITEMS], rows)


def _global_mean(value: tf.Tensor) -> tf.Tensor:
    """The mean of `value` over the replicas of a distributed step (else itself).

    Every replica then moves its copy of a mirrored variable (the self-adjusted
    alpha) by the same amount, so the copies stay equal.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.MEAN, value)

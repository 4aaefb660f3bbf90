"""SASRec: a causal self-attention encoder of item sequences (`sasrec`).

As in the S3-Rec code the GenNi paper builds on: item + learned positional
embeddings, layer norm and dropout, then post-norm Transformer blocks (causal
multi-head self-attention, GELU feed-forward of width 4d, residuals and layer
norm), weights initialised N(0, 0.02). The output h_t at every position scores
item i as h_t . e_i with the same item embedding table (`item_embeddings`).

Dropout draws from generators the layers own (`CheckpointedDropout`), so they
are checkpointed and a resumed run continues the same random stream.
"""

from __future__ import annotations

import tensorflow as tf

from genni.components import schema
from genni.components.dropout import CheckpointedDropout

INITIALIZER_STDDEV = 0.02
LAYER_NORM_EPSILON = 1e-12
FFN_MULTIPLIER = 4
MASK_VALUE = -1e9


def _init(seed: int | None) -> tf.keras.initializers.Initializer:
    """A fresh initializer per weight (a shared unseeded one repeats values)."""
    return tf.keras.initializers.TruncatedNormal(stddev=INITIALIZER_STDDEV, seed=seed)


def _dropout(rate: float, seed: int | None, name: str) -> CheckpointedDropout:
    return CheckpointedDropout(rate, seed=seed, name=name)


def _sub_seed(seed: int | None, offset: int) -> int | None:
    return None if seed is None else seed * 1000 + offset


def _with_settings(layer: tf.keras.layers.Layer, config: dict, names) -> dict:
    """A layer's `get_config`: its base `config` and the settings `names`."""
    return {**config, **{name: getattr(layer, name) for name in names}}


def attention_bias(allowed: tf.Tensor) -> tf.Tensor:
    """The additive bias of attention logits: 0 where `allowed` lets a query
    position (row) read a key position (column), MASK_VALUE elsewhere. It
    depends on the batch's layout only, so an encoder makes it once per
    forward pass and hands it to every block."""
    return (1.0 - allowed) * MASK_VALUE


@tf.keras.utils.register_keras_serializable(package="genni")
class CausalSelfAttentionBlock(tf.keras.layers.Layer):
    """One post-norm Transformer block with causal multi-head self-attention.

    Args:
        hidden_size: d.
        num_heads: attention heads (d must divide evenly).
        dropout: dropout after attention output and feed-forward.
        attention_dropout: dropout on the attention probabilities.
        seed: seed of the block's dropout generators.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.5,
        attention_dropout: float = 0.5,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(
                f"`hidden_size` ({hidden_size}) must be a multiple of `num_heads` "
                f"({num_heads})."
            )
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.seed = seed

        def dense(units: int, name: str, offset: int) -> tf.keras.layers.Dense:
            return tf.keras.layers.Dense(
                units,
                kernel_initializer=_init(_sub_seed(seed, offset)),
                bias_initializer="zeros",
                name=name,
            )

        self.query = dense(hidden_size, "query", 4)
        self.key = dense(hidden_size, "key", 5)
        self.value = dense(hidden_size, "value", 6)
        self.attention_output = dense(hidden_size, "attention_output", 7)
        self.intermediate = dense(FFN_MULTIPLIER * hidden_size, "intermediate", 8)
        self.ffn_output = dense(hidden_size, "ffn_output", 9)
        self.attention_norm = tf.keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="attention_norm"
        )
        self.ffn_norm = tf.keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="ffn_norm"
        )
        self.probs_dropout = _dropout(attention_dropout, _sub_seed(seed, 1), "probs")
        self.attention_dropout_layer = _dropout(dropout, _sub_seed(seed, 2), "attn_out")
        self.ffn_dropout = _dropout(dropout, _sub_seed(seed, 3), "ffn_out")

    def _split_heads(self, x: tf.Tensor) -> tf.Tensor:
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        head_size = self.hidden_size // self.num_heads
        x = tf.reshape(x, [batch, length, self.num_heads, head_size])
        return tf.transpose(x, [0, 2, 1, 3])  # (B, nh, T, hs)

    def attend(self, x: tf.Tensor, bias: tf.Tensor, training: bool) -> tf.Tensor:
        """Causal multi-head self-attention, residual and layer norm.

        x: [B, T, d]; bias: [B or 1, 1, T, T], `attention_bias` of where a
        query position (row) may read a key position (column).
        """
        q = self._split_heads(self.query(x))  # (B, nh, T, hs)
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        head_size = self.hidden_size // self.num_heads
        scores = tf.matmul(q, k, transpose_b=True) / head_size**0.5  # (B, nh, T, T)
        probs = tf.nn.softmax(scores + bias, axis=-1)
        probs = self.probs_dropout(probs, training=training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # (B, T, nh, hs)
        context = tf.reshape(context, tf.shape(x))  # (B, T, d)
        attended = self.attention_dropout_layer(
            self.attention_output(context), training=training
        )
        return self.attention_norm(attended + x)

    def feed_forward(self, x: tf.Tensor, training: bool) -> tf.Tensor:
        """The GELU feed-forward of width 4d, residual and layer norm."""
        hidden = tf.nn.gelu(self.intermediate(x), approximate=False)
        hidden = self.ffn_dropout(self.ffn_output(hidden), training=training)
        return self.ffn_norm(hidden + x)

    def call(self, x: tf.Tensor, bias: tf.Tensor, training: bool = False) -> tf.Tensor:
        """x: [B, T, d]; bias: [B or 1, 1, T, T] (`attend`) -> [B, T, d]."""
        return self.feed_forward(self.attend(x, bias, training), training)

    # The constructor's settings, in `get_config`.
    SETTINGS = ("hidden_size", "num_heads", "dropout", "attention_dropout", "seed")

    def get_config(self) -> dict:
        return _with_settings(self, super().get_config(), self.SETTINGS)


@tf.keras.utils.register_keras_serializable(package="genni")
class SASRecEncoder(tf.keras.layers.Layer):
    """Item sequences [B, T] (left-padded with 0) -> outputs h_t [B, T, d].

    Args:
        num_items: catalog size; the embedding table has num_items + 1 rows.
        max_len: longest input (positional embeddings).
        hidden_size: d (paper: 64).
        num_layers: Transformer blocks (paper: 2).
        num_heads: attention heads (paper: 2).
        dropout: hidden dropout (S3-Rec code: 0.5).
        attention_dropout: attention-probability dropout (S3-Rec code: 0.5).
        seed: seed of the dropout generators.

    Example:

    >>> encoder = SASRecEncoder(num_items=100, max_len=5, hidden_size=8,
    ...                         num_heads=2)
    >>> encoder(tf.constant([[0, 0, 3, 4, 5]])).shape
    TensorShape([1, 5, 8])
    """

    def __init__(
        self,
        num_items: int,
        max_len: int = schema.DEFAULT_MAX_LEN,
        hidden_size: int = 64,
        num_layers: int = 2,
        num_heads: int = 2,
        dropout: float = 0.5,
        attention_dropout: float = 0.5,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # An `ItemTower` (`genni.models.item_tower`) the model's builder sets
        # before the encoder is built: items known by their attributes too.
        # An instance attribute, not a class one: Keras tracks (trains,
        # checkpoints) a layer set on an attribute its class does not define.
        self.item_tower = None
        for name, value in (
            ("num_items", num_items),
            ("max_len", max_len),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
        ):
            if value < 1:
                raise ValueError(f"`{name}` must be positive. Got {value}.")
        for name, value in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
        ):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1). Got {value}.")
        self.num_items = num_items
        self.max_len = max_len
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.seed = seed
        self.item_embedding = tf.keras.layers.Embedding(
            num_items + 1,
            hidden_size,
            embeddings_initializer=_init(_sub_seed(seed, 1)),
            name="items",
        )
        self.position_embedding = tf.keras.layers.Embedding(
            max_len,
            hidden_size,
            embeddings_initializer=_init(_sub_seed(seed, 2)),
            name="positions",
        )
        self.input_norm = tf.keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="input_norm"
        )
        self.input_dropout = _dropout(dropout, _sub_seed(seed, 0), "input_dropout")
        self.blocks = [
            self.make_block(_sub_seed(seed, 10 * (i + 1)), f"block_{i}")
            for i in range(num_layers)
        ]

    # A member of the family that shares SASRec's embeddings and masks
    # changes its blocks: their class, and the settings they take beyond
    # `CausalSelfAttentionBlock`'s (`block_settings`).
    BLOCK: type = CausalSelfAttentionBlock

    def block_settings(self) -> dict:
        """The keyword settings each `BLOCK` takes beyond SASRec's block's."""
        return {}

    def pass_inputs(self, allowed: tf.Tensor) -> dict[str, tf.Tensor]:
        """What every block of one forward pass reads beside its input, made
        once per pass from `allowed` ([B or 1, 1, T, T], 1 where a position
        may read another): the keyword tensors of each `BLOCK`'s call.
        SASRec's blocks read the attention bias (`attention_bias`)."""
        return {"bias": attention_bias(allowed)}

    def make_block(self, seed: int | None, name: str) -> tf.keras.layers.Layer:
        """Block `name` of the stack."""
        return self.BLOCK(
            self.hidden_size,
            self.num_heads,
            self.dropout,
            self.attention_dropout,
            seed=seed,
            name=name,
            **self.block_settings(),
        )

    def build(self, input_shape) -> None:
        self.item_embedding.build(None)
        self.position_embedding.build(None)
        if self.item_tower is not None:
            self.item_tower.build(None)
        super().build(input_shape)

    @property
    def id_table(self) -> tf.Variable:
        """The [num_items + 1, d] ID rows (row 0 is padding)."""
        if not self.item_embedding.built:
            self.item_embedding.build(None)
        return self.item_embedding.embeddings

    @property
    def item_embeddings(self) -> tf.Variable | tf.Tensor:
        """The shared [num_items + 1, d] item vectors (row 0 is padding): the
        ID rows, or with an item tower its vectors (`item_table`)."""
        return self.item_table(training=False)

    def item_table(self, training: bool = False) -> tf.Variable | tf.Tensor:
        """The item vectors the encoder reads and scores: the ID rows, or the
        item tower's (a training step's draw of the ID rows it leaves out)."""
        if self.item_tower is None:
            return self.id_table
        return self.item_tower(self.id_table, training=training)

    def call(
        self,
        input_ids: tf.Tensor,
        training: bool = False,
        causal: bool = True,
        item_vectors: tf.Tensor | None = None,
        positions: tf.Tensor | None = None,
        segments: tf.Tensor | None = None,
    ) -> tf.Tensor:
        """input_ids: [B, T] int, T <= max_len, left-padded -> [B, T, d].

        Inputs narrower than max_len are the last T columns of a max_len-wide
        left-padded input and give the same outputs there.

        Args:
            input_ids: item ids; any id > 0 counts as a real position.
            training: apply dropout.
            causal: attend only to earlier positions (False: to every real
                position, as S3-Rec pre-training does).
            item_vectors: optional [B, T, d] used instead of looking up
                `input_ids` (pre-training puts a mask token at some positions).
            positions, segments: [B, T] of a packed batch (`genni.components.packing`):
                each token's column in its unpacked input, and which sequence
                of the row it belongs to (0: padding). A token then attends
                only to its own sequence, and its output is the unpacked one.
        """
        input_ids = tf.cast(input_ids, tf.int64)
        length = tf.shape(input_ids)[1]
        if item_vectors is None and self.item_tower is None:
            item_vectors = self.item_embedding(input_ids)
        elif item_vectors is None:
            item_vectors = tf.gather(self.item_table(training), input_ids)
        dtype = item_vectors.dtype
        order = tf.ones([length, length], dtype)
        if causal:  # Packed segments are contiguous: earlier columns, earlier items.
            order = tf.linalg.band_part(order, -1, 0)
        # A padding position (whose output is never used) attends to itself, so
        # no row is fully masked and nothing from later positions can leak into
        # any output.
        diagonal = tf.eye(length, dtype=dtype)
        if segments is None:
            # Positions count from the right: the last item is always at
            # max_len - 1, so cutting away leading padding columns changes no
            # output.
            positions = tf.range(self.max_len - length, self.max_len)
            position_vectors = self.position_embedding(positions)[None]
            # A position attends to real items (earlier ones when causal).
            keys = tf.cast(input_ids > schema.PADDING_ID, dtype)[:, None, None, :]
            allowed = tf.maximum(keys * order[None, None], diagonal[None, None])
        else:  # Packed: per-token positions, attention within a segment only.
            positions = tf.cast(positions, tf.int64) + tf.cast(
                self.max_len - length, tf.int64
            )
            position_vectors = self.position_embedding(positions)
            segments = tf.cast(segments, tf.int64)
            same = tf.logical_and(
                tf.equal(segments[:, :, None], segments[:, None, :]),
                segments[:, None, :] > 0,
            )  # (R, query, key)
            allowed = tf.maximum(tf.cast(same, dtype) * order[None], diagonal[None])
            allowed = allowed[:, None]
        x = item_vectors + position_vectors
        x = self.input_dropout(self.input_norm(x), training=training)  # (B, T, d)
        inputs = self.pass_inputs(allowed)  # Once for every block.
        for block in self.blocks:
            x = block(x, training=training, **inputs)
        return x

    # The constructor's settings, in `get_config`.
    SETTINGS = (
        "num_items",
        "max_len",
        "hidden_size",
        "num_layers",
        "num_heads",
        "dropout",
        "attention_dropout",
        "seed",
    )

    def get_config(self) -> dict:
        return _with_settings(self, super().get_config(), self.SETTINGS)

"""FilterMix: SASRec's blocks with a learned causal filter beside attention.

In the spirit of BSARec (AAAI'24), TV-Rec (NeurIPS'25) and WEARec (AAAI'26),
which mix a sequence through filters beside (or instead of) self-attention.
BSARec's block is

    low  = a low-pass filter of x along the sequence (Fourier, global)
    dsp  = LayerNorm(Dropout(low + beta^2 * (x - low)) + x)
    gsp  = causal self-attention of x (residual and layer norm)
    out  = FeedForward(alpha * dsp + (1 - alpha) * gsp)

with a fixed low-pass and a learned per-channel rescale beta of the high
frequencies. Its filter is a global FFT over the sequence: position t reads
every later item, which a model trained at every position of a packed
sequence must never do. FilterMix's low-pass is causal and learned: a
time-invariant filter over the lags 0..max_len-1, one per head (each head a
group of hidden_size / num_heads channels),

    low_t = sum_{s <= t, s allowed} softmax_s(w[t - s]) x_s,

normalised over the positions a token may read (its own sequence in a packed
row, never padding), so left padding, packing and cutting leading padding
columns change no output, as for attention. The filter starts as a moving
average over the last `filter_window` items (its logits 0 inside the window,
-6 outside) and learns its shape. It costs a [T, T] product per head, as
attention's, without the query and key projections. Core TensorFlow ops only
(a gather, a softmax, matmuls): stock TF Serving loads its SavedModel.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from genni.models.encoders.sasrec import (
    LAYER_NORM_EPSILON,
    CausalSelfAttentionBlock,
    SASRecEncoder,
    _dropout,
    _sub_seed,
    attention_bias,
)

# The filter's initial logits outside the moving-average window: e^-6 of a
# lag inside it, so the start is an average of the last `window` items.
OUTSIDE_WINDOW_LOGIT = -6.0


def initial_filter(num_heads: int, max_len: int, window: int) -> np.ndarray:
    """[num_heads, max_len] logits of a moving average over `window` lags."""
    logits = np.full([num_heads, max_len], OUTSIDE_WINDOW_LOGIT, np.float32)
    logits[:, :window] = 0.0
    return logits


def filter_inputs(allowed: tf.Tensor, max_len: int) -> dict[str, tf.Tensor]:
    """What the filters of every block read, made once per forward pass:

    - `lags`: [T, T] int32, t - s clipped to the filter's lags 0..max_len-1;
    - `filter_bias`: [B or 1, 1, T, T], the additive bias of the positions
      s <= t that `allowed` lets row t read. Always causal, also when
      attention is not (pre-training): a row's own position is allowed, so
      no row is empty.
    """
    length = tf.shape(allowed)[-1]
    columns = tf.range(length)
    lags = columns[:, None] - columns[None, :]  # t - s
    lags = tf.clip_by_value(lags, 0, max_len - 1)
    earlier = tf.linalg.band_part(tf.ones([length, length], allowed.dtype), -1, 0)
    return {"lags": lags, "filter_bias": attention_bias(allowed * earlier)}


def _check_mix(filter_alpha: float, filter_window: int) -> None:
    if not 0.0 <= filter_alpha <= 1.0:
        raise ValueError(f"`filter_alpha` must be in [0, 1]. Got {filter_alpha}.")
    if filter_window < 1:
        raise ValueError(f"`filter_window` must be positive. Got {filter_window}.")


@tf.keras.utils.register_keras_serializable(package="genni")
class FilterMixBlock(CausalSelfAttentionBlock):
    """A SASRec block whose input to the feed-forward is
    `filter_alpha * filtered + (1 - filter_alpha) * attended`.

    Args (beyond `CausalSelfAttentionBlock`'s):
        max_len: the longest lag the filter has.
        filter_alpha: the filter's share of the mix (1: no attention, 0:
            SASRec's block).
        filter_window: the initial moving average's width, in items.
    """

    def __init__(
        self,
        *args,
        max_len: int = 50,
        filter_alpha: float = 0.7,
        filter_window: int = 10,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)  # CausalSelfAttentionBlock's settings.
        _check_mix(filter_alpha, filter_window)
        self.max_len = max_len
        self.filter_alpha = filter_alpha
        self.filter_window = filter_window
        self.filter_norm = tf.keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="filter_norm"
        )
        self.filter_dropout = _dropout(
            self.dropout, _sub_seed(self.seed, 11), "filter_out"
        )

    def build(self, input_shape) -> None:
        window = min(self.filter_window, self.max_len)
        self.filter_logits = self.add_weight(
            name="filter_logits",
            shape=[self.num_heads, self.max_len],
            initializer=tf.keras.initializers.Constant(
                initial_filter(self.num_heads, self.max_len, window)
            ),
        )
        # BSARec's sqrt_beta: the high frequencies are rescaled by its square.
        self.sqrt_beta = self.add_weight(
            name="sqrt_beta",
            shape=[self.hidden_size],
            initializer=tf.keras.initializers.RandomNormal(
                seed=_sub_seed(self.seed, 12)
            ),
        )
        super().build(input_shape)

    def filter_weights(self, lags: tf.Tensor, filter_bias: tf.Tensor) -> tf.Tensor:
        """[B or 1, num_heads, T, T]: row t's weights over the positions s <= t
        it may read (each row sums to 1); `lags` and `filter_bias` as
        `filter_inputs` makes them."""
        logits = tf.gather(self.filter_logits, lags, axis=1)  # (nh, T, T)
        return tf.nn.softmax(logits[None] + filter_bias, axis=-1)

    def filtered(
        self, x: tf.Tensor, lags: tf.Tensor, filter_bias: tf.Tensor, training: bool
    ) -> tf.Tensor:
        """BSARec's dsp with the causal low-pass: [B, T, d]."""
        weights = tf.cast(self.filter_weights(lags, filter_bias), x.dtype)
        low = tf.matmul(weights, self._split_heads(x))  # (B, nh, T, hs)
        low = tf.reshape(tf.transpose(low, [0, 2, 1, 3]), tf.shape(x))
        mixed = low + tf.square(self.sqrt_beta) * (x - low)
        return self.filter_norm(self.filter_dropout(mixed, training=training) + x)

    def call(
        self,
        x: tf.Tensor,
        bias: tf.Tensor,
        lags: tf.Tensor,
        filter_bias: tf.Tensor,
        training: bool = False,
    ) -> tf.Tensor:
        """x: [B, T, d]; bias: the attention bias; lags, filter_bias: the
        filter's (`filter_inputs`) -> [B, T, d]."""
        mixed = self.filter_alpha * self.filtered(x, lags, filter_bias, training)
        if self.filter_alpha < 1.0:
            mixed += (1.0 - self.filter_alpha) * self.attend(x, bias, training)
        return self.feed_forward(mixed, training)

    SETTINGS = (
        *CausalSelfAttentionBlock.SETTINGS,
        "max_len",
        "filter_alpha",
        "filter_window",
    )


@tf.keras.utils.register_keras_serializable(package="genni")
class FilterMixEncoder(SASRecEncoder):
    """SASRec's embeddings, masks and stack with `FilterMixBlock`s.

    Args: SASRecEncoder's, and `filter_alpha` (the filter's share of each
    block's mix, BSARec's alpha; default 0.7) and `filter_window` (the
    initial moving average's width; default 10).

    Example:

    >>> encoder = FilterMixEncoder(num_items=100, max_len=5, hidden_size=8,
    ...                            num_heads=2)
    >>> encoder(tf.constant([[0, 0, 3, 4, 5]])).shape
    TensorShape([1, 5, 8])
    """

    BLOCK = FilterMixBlock

    def __init__(
        self,
        num_items: int,
        *args,
        filter_alpha: float = 0.7,
        filter_window: int = 10,
        **kwargs,
    ):
        # Read by `block_settings` when SASRecEncoder's constructor makes the
        # blocks (each block checks them).
        self.filter_alpha = filter_alpha
        self.filter_window = filter_window
        super().__init__(num_items, *args, **kwargs)

    def block_settings(self) -> dict:
        return dict(
            max_len=self.max_len,
            filter_alpha=self.filter_alpha,
            filter_window=self.filter_window,
        )

    def pass_inputs(self, allowed: tf.Tensor) -> dict[str, tf.Tensor]:
        """SASRec's attention bias and the filters' lags and bias
        (`filter_inputs`), once per forward pass."""
        return {**super().pass_inputs(allowed), **filter_inputs(allowed, self.max_len)}

    SETTINGS = (*SASRecEncoder.SETTINGS, "filter_alpha", "filter_window")

"""Type aliases shared by the components."""

import tensorflow as tf

Tensor = tf.Tensor | tf.SparseTensor | tf.RaggedTensor

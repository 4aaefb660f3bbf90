"""GenNi's exact draw: every item of the catalog is a candidate (beta 1, no
cap below the catalog), so a row's law is softmax(alpha * h . e) over every
item but those it never draws."""

from __future__ import annotations

import tensorflow as tf


def candidates(table: tf.Tensor, num_items: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Every item: ids 1..num_items [V] and the table's rows [V, d]."""
    return tf.range(1, num_items + 1, dtype=tf.int64), table


def columns(never: tf.Tensor) -> tf.Tensor:
    """The column of each never-drawn id [rows, w] (-1 for none, id 0)."""
    return never - 1

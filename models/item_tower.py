"""The item tower: an item known by its attributes as well as its ID.

An item's vector is its ID row, where it has a trained one, plus the mean of
its attributes' rows (brand, categories, genres, year: `genni preprocess
--item-attributes`). The encoder reads the same vectors at its input and
scores them as candidates (`SASRecEncoder.item_table`), so a history that
holds an item without a trained ID row is read through its attributes too.

Training leaves out the ID rows of a share of the items at each step
(`id_dropout`, a fresh draw each step): their vectors are then their
attributes alone, as an item without events is, so that path learns to stand
for an item. With no attributes an item's vector is its ID row, as without
the tower.

    features = item_features(attributes, num_items)   # from item_attributes.json
    tower = ItemTower(features, hidden_size=64, id_dropout=0.2, seed=0)
    table = tower(id_table, training=True)             # [num_items + 1, d]
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from genni.components.random import make_generator

MAX_ATTRIBUTES = 64  # An item's first attributes its vector reads.


@dataclasses.dataclass(frozen=True)
class ItemFeatures:
    """A dataset's items as attribute ids: `attributes` [num_items + 1, M]
    (row i: item i's attribute ids, 1-based, 0-padded; row 0 padding),
    `names` the attribute of each id (`names[a - 1]`), `id_rows` [num_items +
    1]: 1 where the item has an ID row training reaches, 0 where it has none
    (an item with no training events), so that it is scored by its
    attributes alone; `unreached`: the attributes left out because no item
    with a trained ID row holds them (their rows would be untrained)."""

    attributes: np.ndarray
    names: tuple[str, ...]
    id_rows: np.ndarray
    unreached: int = 0

    @property
    def num_attributes(self) -> int:
        return len(self.names)


def item_features(
    attributes: dict[str, list],
    num_items: int,
    untrained: set[int] | frozenset = frozenset(),
    max_attributes: int = MAX_ATTRIBUTES,
) -> ItemFeatures:
    """`ItemFeatures` of a dataset's `item_attributes.json` ({item id (1-based,
    as a string): [attribute, ...]}), attribute ids numbered in order of first
    appearance along the item ids (a grown dataset that keeps its items' ids
    keeps its attributes' ids too); `untrained`: item ids without a trained ID
    row; each item's first `max_attributes` attributes."""
    index: dict[str, int] = {}
    rows = [[] for _ in range(num_items + 1)]
    for item in range(1, num_items + 1):
        for value in attributes.get(str(item), [])[:max_attributes]:
            name = str(value)
            rows[item].append(index.setdefault(name, len(index) + 1))
    # An attribute no item with a trained ID row holds would be a row no
    # training reached: it is left out of every item's vectors.
    reached = {a for item, row in enumerate(rows) if item not in untrained for a in row}
    unreached = {a for row in rows for a in row} - reached
    rows = [[a for a in row if a in reached] for row in rows]
    width = max(1, max(len(r) for r in rows))
    matrix = np.zeros((num_items + 1, width), dtype=np.int32)
    for item, row in enumerate(rows):
        matrix[item, : len(row)] = row
    id_rows = np.ones(num_items + 1, dtype=np.float32)
    id_rows[0] = 0.0
    for item in untrained:
        id_rows[item] = 0.0
    return ItemFeatures(matrix, tuple(index), id_rows, len(unreached))


class ItemTower(tf.keras.layers.Layer):
    """Item vectors from an ID table and `ItemFeatures` (see the module).

    Args:
        features: the dataset's `ItemFeatures` (held as non-trainable
            variables: a checkpoint and a SavedModel carry them).
        hidden_size: the width of the ID table.
        id_dropout: the share of items whose ID row a training step leaves
            out, in [0, 1).
        seed: the seed of the attribute rows' initializer and of the draws.
    """

    def __init__(
        self,
        features: ItemFeatures,
        hidden_size: int,
        id_dropout: float = 0.0,
        seed: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0.0 <= id_dropout < 1.0:
            raise ValueError(f"`id_dropout` must be in [0, 1). Got {id_dropout}.")
        self.id_dropout = id_dropout
        self.names = features.names  # Attribute id a is names[a - 1].
        self.num_attributes = features.num_attributes
        # Each (item, attribute) pair, weighted 1 / the item's attributes: the
        # mean as one sparse product, whose work and memory grow with the
        # pairs, not with items x the most attributes of one item.
        items, slots = np.nonzero(features.attributes)
        counts = np.count_nonzero(features.attributes, axis=1)
        self.pairs = tf.Variable(
            np.stack([items, features.attributes[items, slots]], axis=1).astype(
                np.int64
            ),
            trainable=False,
            name="item_attribute_pairs",
        )
        self.pair_weights = tf.Variable(
            (1.0 / counts[items]).astype(np.float32),
            trainable=False,
            name="item_attribute_weights",
        )
        self.shape = (len(features.attributes), features.num_attributes + 1)
        self.id_rows = tf.Variable(features.id_rows, trainable=False, name="id_rows")
        self.attribute_embedding = tf.keras.layers.Embedding(
            features.num_attributes + 1,
            hidden_size,
            embeddings_initializer=tf.keras.initializers.TruncatedNormal(
                stddev=0.02, seed=seed
            ),
            name="attributes",
        )
        self.generator = make_generator(seed)

    def build(self, input_shape=None) -> None:
        self.attribute_embedding.build(None)
        super().build(input_shape)

    def attribute_vectors(self) -> tf.Tensor:
        """[num_items + 1, d]: the mean of each item's attribute rows (0 for
        an item with none)."""
        table = self.attribute_embedding.embeddings
        mean = tf.SparseTensor(
            self.pairs, tf.cast(self.pair_weights, table.dtype), self.shape
        )
        return tf.sparse.sparse_dense_matmul(mean, table)

    def call(self, id_table: tf.Tensor, training: bool = False) -> tf.Tensor:
        """[num_items + 1, d]: each item's ID row (where it has one, and a
        training step keeps it) plus its attributes' mean."""
        keep = self.id_rows[:, None]
        if training and self.id_dropout > 0.0:
            shape = tf.shape(keep)
            if tf.distribute.get_strategy().num_replicas_in_sync > 1:
                # As `CheckpointedDropout`: a fixed-size draw of a seed moves
                # every replica's generator alike.
                seed = self.generator.make_seeds(1)[:, 0]
                noise = tf.random.stateless_uniform(shape, seed, dtype=keep.dtype)
            else:
                noise = self.generator.uniform(shape, dtype=keep.dtype)
            keep = keep * tf.cast(noise >= self.id_dropout, keep.dtype)
        return id_table * tf.cast(keep, id_table.dtype) + self.attribute_vectors()

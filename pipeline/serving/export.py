"""`genni export`: a trained run as a SavedModel that stock TF Serving loads.

MODEL_BASE/<version>/ holds a SavedModel whose signatures take raw item-id
strings and return raw item-id strings:

- `serving_default`: `history` string [B, L] -> `item_ids` string [B, K],
  `scores` float [B, K] and `num_results` int32 [B], K fixed at export (`--k`).
- `top_k`: `history` string [B, L] and `k` int32 [] -> the same with k items.
- `user_embedding`: `history` string [B, L] -> `embedding` float [B, d], for
  external nearest-neighbour indexes.

`history` is each user's recent items, oldest first, padded with "" to a common
length. Inside the graph: vocabulary lookup (unknown ids and "" are dropped),
truncation to the model's max length, the SASRec encoder, scores over all items
(a brute-force matmul and `top_k`, core ops only) and the candidate rule the
run was evaluated with (`--candidates`): "new" never answers an item of the
history, "all" may. A history with no known item gets the most popular items.

The answer never holds padding or an excluded item. When fewer than k items
are candidates (a history that covers nearly the whole catalog under "new"),
row b holds `num_results[b]` real items first; its remaining slots hold the
item id "" with score -inf. A NaN or inf score of an item ranks it after
every finite one (its score is returned as the lowest float32).
"""

from __future__ import annotations

import json
import os
import uuid

import numpy as np
import tensorflow as tf

from genni.components import metrics, schema
from genni.components.metrics import check_candidates
from genni.pipeline import atomic
from genni.pipeline.serving import warmup as serving_warmup
from genni.pipeline.training import data, train

DEFAULT_K = 10
SIGNATURE_TOP_K = "top_k"
SIGNATURE_EMBEDDING = "user_embedding"
HISTORY = "history"
K = "k"
ITEM_IDS = "item_ids"
SCORES = "scores"
EMBEDDING = "embedding"
NUM_RESULTS = "num_results"
NEG_INF = float("-inf")
# What the graph was exported with, for the tools that answer beside it
# (`genni.pipeline.serving.ann`); TF Serving ignores assets.extra.
SETTINGS_FILE = os.path.join("assets.extra", "genni_export.json")
LOWEST = float(np.finfo(np.float32).min)


class ServingModule(tf.Module):
    """Raw item ids in, top-K raw item ids and scores out."""

    def __init__(
        self,
        model: tf.Module,
        items: list[str],
        popularity: np.ndarray,
        max_len: int,
        default_k: int = DEFAULT_K,
        candidates: str = "new",
        item_table: np.ndarray | None = None,
    ):
        """`item_table`: [len(items) + 1, d] vectors to serve instead of the
        model's own (a catalog grown past the trained one:
        `genni.pipeline.serving.catalog_version`); the encoder then reads
        its inputs from it too."""
        super().__init__(name="genni_serving")
        self.candidates = check_candidates(candidates)
        if not 1 <= default_k <= len(items):
            raise ValueError(
                f"`k` must be between 1 and the {len(items)} items. Got {default_k}."
            )
        self.encoder = model.encoder
        # The same variable under a stable name, for `genni ann-index`; an
        # item tower's vectors, computed once (`genni.models.item_tower`).
        table = model.encoder.item_embeddings if item_table is None else item_table
        if not isinstance(table, tf.Variable):
            table = tf.Variable(table, trainable=False, name="item_vectors")
        if table.shape[0] != len(items) + 1:
            raise ValueError(
                f"The item table has {table.shape[0] - 1} items, the vocabulary "
                f"{len(items)}."
            )
        self.item_table = table
        # The encoder reads the served vectors, not its own rows, where they
        # differ from its ID rows.
        self.reads_table = (
            item_table is not None
            or getattr(self.encoder, "item_tower", None) is not None
        )
        self.num_items = len(items)
        self.max_len = max_len
        self.default_k = default_k
        vocabulary = tf.constant(items)
        self.lookup = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                vocabulary, tf.range(1, len(items) + 1, dtype=tf.int64)
            ),
            default_value=schema.PADDING_ID,
        )
        self.item_strings = tf.Variable(
            tf.concat([[""], vocabulary], axis=0), trainable=False, name="items"
        )
        fallback = np.log1p(np.asarray(popularity, dtype=np.float64)).astype(np.float32)
        self.popularity = tf.Variable(fallback, trainable=False, name="popularity")

    def _input_ids(self, history: tf.Tensor) -> tf.Tensor:
        """[B, L] strings -> [B, max_len] ids: known items, most recent, left-padded."""
        ids = self.lookup.lookup(history)  # (B, L), 0 for unknown and ""
        recent = tf.ragged.boolean_mask(ids, ids > schema.PADDING_ID)[
            :, -self.max_len :
        ]
        # Reversing the flat values reverses rows and items; padding on the
        # right of that, then reversing both axes, pads on the left.
        flipped = tf.RaggedTensor.from_row_lengths(
            tf.reverse(recent.flat_values, [0]), tf.reverse(recent.row_lengths(), [0])
        )
        dense = flipped.to_tensor(schema.PADDING_ID, shape=[None, self.max_len])
        return tf.reverse(dense, [0, 1])  # (B, max_len)

    def _embed(self, history: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        input_ids = self._input_ids(history)
        if not self.reads_table:
            outputs = self.encoder(input_ids, training=False)
        else:  # The vectors as exported (a tower's), not computed a request.
            vectors = tf.gather(self.item_table, input_ids)
            outputs = self.encoder(input_ids, training=False, item_vectors=vectors)
        return outputs[:, -1, :], input_ids  # (B, d)

    def _top_k(self, history: tf.Tensor, k: tf.Tensor) -> dict[str, tf.Tensor]:
        embedding, input_ids = self._embed(history)
        table = self.item_table  # (V + 1, d)
        scores = tf.matmul(embedding, table, transpose_b=True)  # (B, V + 1)
        has_items = tf.reduce_any(input_ids > schema.PADDING_ID, axis=1)
        fallback = tf.broadcast_to(self.popularity[None, :], tf.shape(scores))
        scores = tf.where(has_items[:, None], scores, fallback)
        # A non-finite score ranks after every finite one, above exclusions.
        scores = tf.where(tf.math.is_finite(scores), scores, LOWEST)
        # Leave out what the run's rule does (`metrics.left_out`): padding and,
        # under "new", every item of the whole history (not only the last
        # max_len); unknown ids map to 0, the padding column.
        scores = metrics.mask_left_out(
            scores, self.lookup.lookup(history), self.candidates
        )
        k = tf.clip_by_value(tf.cast(k, tf.int32), 1, self.num_items)
        values, top = tf.math.top_k(scores, k=k)
        real = values > NEG_INF  # Candidates are finite; exclusions are -inf.
        item_ids = tf.where(real, tf.gather(self.item_strings, top), "")
        return {
            ITEM_IDS: item_ids,
            SCORES: values,
            NUM_RESULTS: tf.reduce_sum(tf.cast(real, tf.int32), axis=1),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name=HISTORY)])
    def serve(self, history: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._top_k(history, tf.constant(self.default_k))

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.string, name=HISTORY),
            tf.TensorSpec([], tf.int32, name=K),
        ]
    )
    def serve_top_k(self, history: tf.Tensor, k: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._top_k(history, k)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name=HISTORY)])
    def serve_embedding(self, history: tf.Tensor) -> dict[str, tf.Tensor]:
        return {EMBEDDING: self._embed(history)[0]}


def next_version(base: str) -> int:
    versions = (
        [int(v) for v in os.listdir(base) if v.isdigit()] if os.path.isdir(base) else []
    )
    return max(versions, default=0) + 1


def export(
    run_dir: str,
    base: str,
    version: int | None = None,
    k: int = DEFAULT_K,
    data_dir: str | None = None,
    candidates: str | None = None,
) -> str:
    """Export the best weights of `run_dir` to `base`/<version>; returns the path.

    `candidates`: the served ranking rule; by default the run's own, so the
    served top-K is ranked the way the run was evaluated.
    """
    config = train.read_config(run_dir, data_dir)
    dataset = data.Dataset.open(config.data)
    model = train.load_run(run_dir, data_dir, dataset)
    items = dataset.ids(schema.ITEMS_FILE)[1:]
    module = ServingModule(
        model,
        items,
        dataset.item_counts(),
        dataset.max_len,
        k,
        candidates or config.candidates,
    )
    return save_module(module, base, version, items, model=config.model.encoder)


class PopularityEncoder(tf.Module):
    """The most-popular ranking as an encoder: every position's output is 1
    and each item's one-number "embedding" log(1 + its training count), so
    the served scores are the popularity whatever the history. With it a
    `ServingModule` is the popularity baseline with the same signatures,
    the same vocabulary lookup and the same candidate rule as a model."""

    def __init__(self, counts: np.ndarray):
        super().__init__(name="popularity_encoder")
        table = np.log1p(np.asarray(counts, dtype=np.float64)).astype(np.float32)
        self.item_embeddings = tf.Variable(
            table[:, None], trainable=False, name="item_embeddings"
        )

    def __call__(self, input_ids: tf.Tensor, training: bool = False) -> tf.Tensor:
        shape = tf.concat([tf.shape(input_ids), [1]], axis=0)
        return tf.ones(shape, tf.float32)


class _Popular:
    def __init__(self, counts: np.ndarray):
        self.encoder = PopularityEncoder(counts)


def export_popular(
    data_dir: str,
    base: str,
    version: int | None = None,
    k: int = DEFAULT_K,
    candidates: str = "new",
) -> str:
    """The popularity ranking of `data_dir` (its learned events' item
    counts, `learned_counts`) as a SavedModel with a model's signatures
    (`PopularityEncoder`), exported to `base`/<version>; returns the path.
    What the guarded export compares a candidate with, and what serves while
    no model has beaten it (`genni.pipeline.serving.guard`)."""
    dataset = data.Dataset.open(data_dir)
    items = dataset.ids(schema.ITEMS_FILE)[1:]
    counts = learned_counts(data_dir, items)
    module = ServingModule(
        _Popular(counts), items, counts, dataset.max_len, k, candidates
    )
    return save_module(module, base, version, items, model=POPULAR)


POPULAR = "popular"


def learned_counts(data_dir: str, items: list[str]) -> np.ndarray:
    """[len(items) + 1] each item's events among those learned (the whole
    training sequences of `sequences.tsv`, not only their last max_len)."""
    index = {item: i for i, item in enumerate(items, start=1)}
    counts = np.zeros(len(items) + 1, np.int64)
    with tf.io.gfile.GFile(os.path.join(data_dir, schema.SEQUENCES_FILE)) as f:
        for line in f:
            for item in line.rstrip("\n").partition("\t")[2].split():
                counts[index.get(item, 0)] += 1
    counts[0] = 0
    return counts


def is_popular(path: str) -> bool:
    """Whether the export at `path` is the popularity ranking (`export_popular`)."""
    try:
        return read_settings(path).get("model") == POPULAR
    except ValueError:
        return False


def save_module(
    module: ServingModule,
    base: str,
    version: int | None,
    items: list[str],
    model: str,
) -> str:
    """Write `module` as version `version` (default: the next) of `base`,
    staged and moved into place whole, with its warm-up requests and its
    SETTINGS_FILE (`model`: what ranks); returns the version's path."""
    version = version if version is not None else next_version(base)
    if version < 1:
        raise ValueError(f"`version` must be a positive integer. Got {version}.")
    final = os.path.join(base, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final!r} exists; choose another --version.")
    os.makedirs(base, exist_ok=True)
    staging = os.path.join(base, f".staging-{version}-{uuid.uuid4().hex[:8]}")
    with atomic.staged(final, staging):  # TF Serving never sees half a version.
        tf.saved_model.save(
            module,
            staging,
            signatures={
                "serving_default": module.serve,
                SIGNATURE_TOP_K: module.serve_top_k,
                SIGNATURE_EMBEDDING: module.serve_embedding,
            },
        )
        serving_warmup.write(staging, items)
        write_settings(staging, module, model)
    return final


def write_settings(path: str, module: ServingModule, model: str) -> None:
    """SETTINGS_FILE of the export at `path`: its ranking rule, k, sizes and
    what ranks (`model`: the run's encoder, or POPULAR for `export_popular`)."""
    settings = {
        "model": model,
        "candidates": module.candidates,
        "k": module.default_k,
        "num_items": module.num_items,
        "max_len": module.max_len,
    }
    write_asset(path, SETTINGS_FILE, settings)


def write_asset(path: str, name: str, value: dict, indent: int | None = 2) -> None:
    """`value` as the JSON file `name` (under assets.extra/: TF Serving
    ignores it) of the export at `path`; `indent` None: on one line."""
    os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
    with open(os.path.join(path, name), "w", encoding="utf-8") as f:
        json.dump(value, f, indent=indent, sort_keys=True)


def read_asset(path: str, name: str) -> dict:
    """The JSON file `name` of the export at `path` (`write_asset`), or {}
    where it has none or it cannot be read."""
    try:
        with open(os.path.join(path, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def read_settings(path: str) -> dict:
    """The export's SETTINGS_FILE; ValueError for an export made without one."""
    try:
        with open(os.path.join(path, SETTINGS_FILE), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ValueError(
            f"{path!r} has no {SETTINGS_FILE}: export it again with this version "
            "of `genni export`."
        ) from None


def reference_top_k(
    model: tf.Module,
    items: list[str],
    history: list[str],
    max_len: int,
    k: int,
    candidates: str = "new",
) -> tuple[list[str], np.ndarray]:
    """Top-K of the in-process model, in NumPy: the oracle for the SavedModel.

    Same contract as the `serving_default` signature for a history with at
    least one known item and at least k candidates.
    """
    ids = {item: i for i, item in enumerate(items, start=1)}
    known = [ids[h] for h in history if h in ids]
    if not known:
        raise ValueError("The reference needs at least one known item.")
    recent = known[-max_len:]
    x = np.zeros([1, max_len], np.int64)
    x[0, max_len - len(recent) :] = recent
    scores = model(tf.constant(x))
    scores = metrics.mask_left_out(scores, tf.constant([known]), candidates)
    scores = scores.numpy()[0]
    top = np.argsort(-scores, kind="stable")[:k]
    return [items[i - 1] for i in top], scores[top]

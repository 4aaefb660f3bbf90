"""`genni evaluate`: full-ranking metrics of a model on one split."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from genni.components import packing, schema
from genni.components.metrics import (
    RankingAccumulator,
    chunked_target_ranks,
    in_history,
)
from genni.models.retrieval import SequentialRetrievalModel
from genni.pipeline.training.data import Dataset
from genni.pipeline.training.model import load_run, read_config

# The test cases reported apart when some target has no training event:
# `cold` (the target never trained on) and `warm` ranked over the whole
# catalog, and `cold_among_cold`, the cold ones ranked among the cold items
# alone (the cold-start benchmark's protocol: `--hold-out-items`).
COLD_GROUPS = ("cold", "warm", "cold_among_cold")

EVAL_BATCH_SIZE = 512
# Most scores (users x items) one evaluation batch holds: 2^25 floats, 128 MiB.
MAX_EVAL_SCORES = 1 << 25
# Scores of one chunk of the Evaluator's full ranking: 2^20 floats, 4 MiB
# (2,048 items for 512 users), at any catalog size: small enough for the
# caches, and faster than one matrix of all scores.
EVAL_CHUNK_SCORES = 1 << 20


def eval_batch_size(num_items: int) -> int:
    """Users per batch for a ranking that holds all their scores at once (the
    SavedModel's): EVAL_BATCH_SIZE, fewer for a catalog so large that their
    scores would pass MAX_EVAL_SCORES (512 users up to 65,535 items; 33 at
    10^6), so it runs in bounded memory at any size."""
    return max(1, min(EVAL_BATCH_SIZE, MAX_EVAL_SCORES // (num_items + 1)))


def eval_chunk_size() -> int:
    """Items the Evaluator scores at once for a batch of EVAL_BATCH_SIZE users."""
    return max(1, EVAL_CHUNK_SCORES // EVAL_BATCH_SIZE)


class Evaluator:
    """Full-ranking metrics of a model on one split of `dataset` (cached input).

    Users come EVAL_BATCH_SIZE at a time and items a chunk at a time
    (`chunked_target_ranks`), so memory is bounded at any catalog size.

    `candidates`: the ranking rule of `genni.components.metrics` ("new" or "all").
    After a call, `users` and `repeat_targets` (users whose target repeats an
    item of their history) describe the split, and with `by_target`, so does
    `by_target`: its cases whose target was never trained on, apart.
    """

    def __init__(
        self,
        dataset: Dataset,
        split: str,
        pack: bool = False,
        candidates: str = "new",
        by_target: bool = False,
    ):
        """`pack`: run the encoder on packed batches (the same scores);
        `by_target`: rank the cases whose target was never trained on among
        those items too (the test split's report; not each epoch's
        validation)."""
        self.split = split
        self.pack = pack
        self.candidates = candidates
        self.users = 0
        self.repeat_targets = 0
        self.by_target: dict = {}
        # Items never trained on (`Dataset.cold_items`): their cases are
        # reported apart.
        self._cold = dataset.cold_items() if by_target else np.zeros(0, np.int64)
        self._rows = dataset.num_items + 1
        max_len = dataset.max_len
        self._batches = dataset.batches(split, EVAL_BATCH_SIZE)
        if pack:  # Packed once, then cached.
            self._batches = self._batches.map(
                lambda features: packing.pack_inputs(features, max_len)
            ).cache()
        self._ranks = None

    def __call__(self, model: SequentialRetrievalModel) -> dict[str, float]:
        if self._ranks is None:
            chunk_size = eval_chunk_size()

            cold = tf.constant(self._cold, tf.int64)
            # Item id -> its place among the cold items (1-based; 0: warm).
            place = tf.scatter_nd(
                cold[:, None],
                tf.range(1, tf.size(cold, tf.int64) + 1),
                [self._rows],
            )

            @tf.function(reduce_retracing=True)
            def ranks(features, table):
                if self.pack:
                    queries = model.packed_query_embeddings(
                        features, tf.shape(features[schema.TARGET])[0], table
                    )
                else:
                    queries = model.query_embeddings(features[schema.INPUT_IDS], table)
                target, history = features[schema.TARGET], features[schema.HISTORY]
                repeats = tf.reduce_sum(tf.cast(in_history(target, history), tf.int64))
                ranked = chunked_target_ranks(
                    queries, table, target, history, self.candidates, chunk_size
                )
                if not self._cold.size:  # Every item trained on.
                    return ranked, ranked, repeats
                # Among the cold items alone (a warm target's rank: unused).
                among_cold = chunked_target_ranks(
                    queries,
                    tf.gather(table, tf.concat([[0], cold], 0)),
                    tf.gather(place, tf.cast(target, tf.int64)),
                    tf.ragged.map_flat_values(
                        tf.gather, place, tf.cast(history, tf.int64)
                    ),
                    self.candidates,
                    chunk_size,
                )
                return ranked, among_cold, repeats

            self._ranks = ranks
        groups = {name: RankingAccumulator() for name in ("all", *COLD_GROUPS)}
        repeats = 0
        cold_ids = self._cold.tolist()
        # The item vectors once per evaluation (an item tower computes them),
        # read by every batch's queries and candidates.
        table = tf.convert_to_tensor(model.item_embeddings)
        for features in self._batches:
            ranks, among_cold, batch_repeats = self._ranks(features, table)
            ranks, among_cold = ranks.numpy(), among_cold.numpy()
            groups["all"].update(ranks)
            repeats += int(batch_repeats)
            if not cold_ids:  # Nothing to report apart.
                continue
            is_cold = np.isin(features[schema.TARGET].numpy(), cold_ids)
            for name, rows, of in (
                ("cold", is_cold, ranks),
                ("warm", ~is_cold, ranks),
                ("cold_among_cold", is_cold, among_cold),
            ):
                if rows.any():
                    groups[name].update(of[rows])
        self.users, self.repeat_targets = groups["all"].count, repeats
        self.by_target = {}
        if groups["cold"].count:  # Some target was never trained on.
            self.by_target = {
                name: groups[name].result() | {"cases": groups[name].count}
                for name in COLD_GROUPS
                if groups[name].count
            }
            self.by_target["cold_items"] = len(cold_ids)
        return groups["all"].result()

    def repeat_summary(self) -> dict:
        """`metrics.json`'s record of repeated targets on this split."""
        return {
            "users": self.users,
            "repeat_targets": self.repeat_targets,
            "candidates": self.candidates,
        }


def repeat_line(split: str, users: int, repeats: int, candidates: str) -> str:
    """'test repeat targets: 739 of 2,000 (37.0%), ...' for people."""
    share = 100.0 * repeats / users if users else 0.0
    what = (
        "each a miss under --candidates new"
        if candidates == "new"
        else "ranked among all items (--candidates all)"
    )
    return f"{split} repeat targets: {repeats:,} of {users:,} ({share:.1f}%), {what}"


def evaluate(
    run_dir: str, data_dir: str | None, split: str, candidates: str | None = None
) -> tuple[dict[str, float], dict]:
    """Full-ranking metrics of a run's best weights on `split`.

    `candidates`: the ranking rule (default: the run's). Returns the metrics
    and the split's repeated targets (`Evaluator.repeat_summary`), with its
    cases by target (`Evaluator.by_target`, and the content baseline of its
    cold cases) when some target was never trained on.
    """
    config = read_config(run_dir, data_dir)
    dataset = Dataset.open(config.data)
    model = load_run(run_dir, data_dir, dataset)
    evaluator = Evaluator(
        dataset, split, config.pack, candidates or config.candidates, by_target=True
    )
    metrics = evaluator(model)
    summary = evaluator.repeat_summary()
    if evaluator.by_target:
        from genni.pipeline.training.cold import by_target_with_baseline

        summary["by_target"] = by_target_with_baseline(
            evaluator.by_target, dataset, split
        )
    return metrics, summary

"""`genni evaluate`: full-ranking metrics of a model on one split."""

from __future__ import annotations

import tensorflow as tf

from genni.components import packing, schema
from genni.components.metrics import RankingAccumulator, in_history, target_ranks
from genni.models.retrieval import SequentialRetrievalModel
from genni.pipeline.training.data import Dataset
from genni.pipeline.training.model import load_run, read_config

EVAL_BATCH_SIZE = 512
# Most scores (users x items) one evaluation batch holds: 2^25 floats, 128 MiB.
MAX_EVAL_SCORES = 1 << 25


def eval_batch_size(num_items: int) -> int:
    """Users per evaluation batch: EVAL_BATCH_SIZE, fewer for a catalog so
    large that their scores would pass MAX_EVAL_SCORES (512 users up to 65,535
    items; 33 at 10^6), so full ranking runs in bounded memory at any size."""
    return max(1, min(EVAL_BATCH_SIZE, MAX_EVAL_SCORES // (num_items + 1)))


class Evaluator:
    """Full-ranking metrics of a model on one split of `dataset` (cached input).

    `candidates`: the ranking rule of `genni.components.metrics` ("new" or "all").
    After a call, `users` and `repeat_targets` (users whose target repeats an
    item of their history) describe the split.
    """

    def __init__(
        self,
        dataset: Dataset,
        split: str,
        pack: bool = False,
        candidates: str = "new",
    ):
        """`pack`: run the encoder on packed batches (the same scores)."""
        self.split = split
        self.pack = pack
        self.candidates = candidates
        self.users = 0
        self.repeat_targets = 0
        max_len = dataset.max_len
        batch_size = eval_batch_size(dataset.info.num_items)
        self._batches = dataset.batches(split, batch_size)
        if pack:  # Packed once, then cached.
            self._batches = self._batches.map(
                lambda features: packing.pack_inputs(features, max_len)
            ).cache()
        self._ranks = None

    def __call__(self, model: SequentialRetrievalModel) -> dict[str, float]:
        if self._ranks is None:

            @tf.function(reduce_retracing=True)
            def ranks(features):
                if self.pack:
                    scores = model.packed_call(
                        features, tf.shape(features[schema.TARGET])[0]
                    )
                else:
                    scores = model(features[schema.INPUT_IDS])
                target, history = features[schema.TARGET], features[schema.HISTORY]
                repeats = tf.reduce_sum(tf.cast(in_history(target, history), tf.int64))
                return target_ranks(scores, target, history, self.candidates), repeats

            self._ranks = ranks
        accumulator = RankingAccumulator()
        repeats = 0
        for features in self._batches:
            ranks, batch_repeats = self._ranks(features)
            accumulator.update(ranks.numpy())
            repeats += int(batch_repeats)
        self.users, self.repeat_targets = accumulator.count, repeats
        return accumulator.result()

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
    and the split's repeated targets (`Evaluator.repeat_summary`).
    """
    config = read_config(run_dir, data_dir)
    dataset = Dataset.open(config.data)
    model = load_run(run_dir, data_dir, dataset)
    evaluator = Evaluator(dataset, split, config.pack, candidates or config.candidates)
    return evaluator(model), evaluator.repeat_summary()

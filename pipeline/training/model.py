"""The one model builder, and a run's model read back from its directory.

Training, evaluation, tuning, export and the report build their model here:
the encoder from the run's `SASRecConfig` (`genni.models.config`), the
sampler through the samplers' registry, the TFRS retrieval model around both.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from genni.components.samplers import registry
from genni.models.config import build_encoder
from genni.models.retrieval import SequentialRetrievalModel
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset

CONFIG_FILE = rundir.CONFIG_FILE
BEST_DIR = "best"


def build_model(
    config: TrainConfig,
    dataset: Dataset,
    item_counts: np.ndarray | None = None,
    successors: bool = True,
) -> SequentialRetrievalModel:
    """The model of `config` on `dataset`, compiled, its variables created.

    `item_counts`: the counts a popularity sampler draws from (default: the
    dataset's); samplers that need none ignore them. `successors`: fill a
    GenNi sampler's successor table from the dataset (False where a
    checkpoint restores it, or nothing draws).
    """
    info = dataset.info
    encoder = build_encoder(config.model(info))
    sampler = None
    if config.loss != "softmax":  # The full softmax draws no negatives.
        kind = registry.get(config.sampler)
        if kind.needs_item_counts and item_counts is None:
            item_counts = dataset.item_counts()
        sampler = registry.build_sampler(
            config.sampler_config(
                num_items=info.num_items, positions=_positions(config, dataset)
            ),
            info.num_items,
            item_counts,
        )
    model = SequentialRetrievalModel(
        encoder,
        sampler,
        loss=config.loss,
        logq_correction=config.logq_correction,
        exclude_seen=config.exclude_seen,
        alpha_step=config.alpha_step,
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(config.learning_rate))
    model(tf.zeros([1, info.max_len], tf.int64))  # Create the variables.
    # And the optimizer's: created at the first step instead, they make
    # `fit` trace its train step twice (tracing is most of a small run's time).
    model.optimizer.build(model.trainable_variables)
    if sampler is not None and not sampler.built:
        # Its state (GenNi's clusters, successor table) now, not at the first
        # step, where it would make `fit` trace the step twice; built, it is
        # there for a checkpoint to restore.
        sampler.build(tf.TensorShape([None, config.hidden_size]))
    if sampler is not None and config.successors is not None and successors:
        sampler.set_successors(dataset.successor_table(config.successors))
    return model


def _positions(config: TrainConfig, dataset: Dataset) -> float | None:
    """A training step's mean positions, when `draw_budget` needs them."""
    if config.draw_budget is None:
        return None
    return dataset.positions_per_step(config.batch_size)


def read_config(run_dir: str, data_dir: str | None = None) -> TrainConfig:
    """The `TrainConfig` of a run, optionally pointed at another dataset copy."""
    config_path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{config_path} not found: is {run_dir!r} a run?")
    values = rundir.read_json(config_path)
    if data_dir is not None:
        values["data"] = data_dir
    return TrainConfig.from_dict(values)


def load_run(
    run_dir: str, data_dir: str | None = None, dataset: Dataset | None = None
) -> SequentialRetrievalModel:
    """The model of a finished (or running) run, with its best weights.

    `dataset`: the run's dataset when the caller has it open already.
    """
    config = read_config(run_dir, data_dir)
    dataset = dataset or Dataset.open(config.data)
    # The weights do not depend on a popularity sampler's counts.
    model = build_model(
        config, dataset, np.ones(dataset.num_items + 1), successors=False
    )
    best_path = os.path.join(run_dir, BEST_DIR, "weights")
    if not tf.io.gfile.exists(best_path + ".index"):
        raise FileNotFoundError(f"{run_dir!r} has no best weights yet.")
    tf.train.Checkpoint(model=model).read(best_path).expect_partial()
    return model

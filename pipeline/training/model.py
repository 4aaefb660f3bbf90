"""The one model builder, and a run's model read back from its directory.

Training, evaluation, tuning, export and the report build their model here:
the encoder from the run's `ModelConfig` (`genni.models.config`), the
sampler through the samplers' registry from its `SamplerConfig` (then its
`setup` on the training data), the TFRS retrieval model around both.
"""

from __future__ import annotations

import os

import tensorflow as tf

from genni.components.samplers import registry
from genni.models.config import build_encoder
from genni.models.retrieval import SequentialRetrievalModel
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig
from genni.pipeline.training.data import Dataset

CONFIG_FILE = rundir.CONFIG_FILE
BEST_DIR = "best"


def learning_rate(config: TrainConfig):
    """Adam's learning rate: constant, or halved every `lr_half_life` steps."""
    if config.lr_half_life is None:
        return config.learning_rate
    return tf.keras.optimizers.schedules.ExponentialDecay(
        config.learning_rate, decay_steps=config.lr_half_life, decay_rate=0.5
    )


def build_model(
    config: TrainConfig, dataset: Dataset, setup: bool = True
) -> SequentialRetrievalModel:
    """The model of `config` on `dataset`, compiled, its variables created.

    `setup`: give the sampler what it needs of the training data (its
    `setup`: a popularity sampler's counts, GenNi's successor table); False
    where nothing draws, or a checkpoint restores it.
    """
    info = dataset.info
    encoder = build_encoder(config.encoder(info))
    if config.model.item_tower:
        attach_item_tower(encoder, config, dataset)
    sampler = None
    if config.loss != "softmax":  # The full softmax draws no negatives.
        positions = None
        if config.sampler.draw_budget is not None:  # A step's mean positions.
            positions = dataset.positions_per_step(config.batch_size)
        sampler = registry.build_sampler(
            config.sampler_at(num_items=info.num_items, positions=positions),
            info.num_items,
            config.sampler_seed,
        )
    model = SequentialRetrievalModel(
        encoder,
        sampler,
        loss=config.loss,
        logq_correction=config.logq_correction,
        alpha_step=config.sampler.alpha_step,
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate(config)))
    model(tf.zeros([1, info.max_len], tf.int64))  # Create the variables.
    # And the optimizer's: created at the first step instead, they make
    # `fit` trace its train step twice (tracing is most of a small run's time).
    model.optimizer.build(model.trainable_variables)
    if sampler is not None and not sampler.built:
        # Its state (GenNi's clusters, successor table) now, not at the first
        # step, where it would make `fit` trace the step twice; built, it is
        # there for a checkpoint to restore.
        sampler.build(tf.TensorShape([None, config.model.hidden_size]))
    if sampler is not None and setup:
        sampler.setup(dataset)
    return model


def attach_item_tower(encoder, config: TrainConfig, dataset: Dataset) -> None:
    """Give `encoder` (not built yet) the item tower of `config` on
    `dataset`'s item attributes (`genni.models.item_tower`)."""
    from genni.models.item_tower import ItemTower

    encoder.item_tower = ItemTower(
        dataset.item_features(),
        config.model.hidden_size,
        config.model.id_dropout,
        seed=None if config.seed is None else config.seed * 1000 + 7,
        name="item_tower",
    )


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
    # The weights do not depend on what a sampler reads of the data.
    model = build_model(config, dataset, setup=False)
    best_path = os.path.join(run_dir, BEST_DIR, "weights")
    if not tf.io.gfile.exists(best_path + ".index"):
        raise FileNotFoundError(f"{run_dir!r} has no best weights yet.")
    tf.train.Checkpoint(model=model).read(best_path).expect_partial()
    return model

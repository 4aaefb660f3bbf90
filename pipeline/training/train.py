"""`genni train` and `genni evaluate`: training with early stopping, resumable.

A run directory holds:

| path           | what                                                  |
|----------------|-------------------------------------------------------|
| `config.json`  | the `TrainConfig` of the run                          |
| `checkpoints/` | model, optimizer, every random generator, per epoch   |
| `state.json`   | progress and early stopping at the latest checkpoint  |
| `best/`        | weights at the best validation NDCG@10                |
| `tensorboard/` | loss, positive/negative scores, alpha, beta, metrics  |
| `metrics.json` | config, best epoch, valid and test metrics, timings   |
| `workers/`     | other workers' checkpoints (multi-worker; removed)    |

A killed run continues with `--resume` from its last checkpoint and ends where
an uninterrupted run would: the batch order depends only on (seed, epoch), and
all randomness (dropout, sampler) comes from generators saved in checkpoints.

A non-finite loss or validation metric stops the run with `NonFiniteError`
(naming the epoch and step) before that epoch is checkpointed: the last good
checkpoint stays, `--resume` continues from it, and a non-finite epoch is
never the best one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import statistics
import time

import numpy as np
import tensorflow as tf

from genni.components import packing, schema
from genni.components.metrics import RankingAccumulator, in_history, target_ranks
from genni.components.samplers import GenNiSampler, PopularitySampler, UniformSampler
from genni.components.schedules import beta_for_epoch
from genni.models.retrieval import SequentialRetrievalModel
from genni.models.sasrec import SASRecEncoder
from genni.pipeline.preprocess import sequences
from genni.pipeline.training import data, rundir
from genni.pipeline.training.config import STRATEGIES, PretrainConfig, TrainConfig

_LOG = logging.getLogger(__name__)

CONFIG_FILE = rundir.CONFIG_FILE
STATE_FILE = rundir.STATE_FILE
RunExistsError = rundir.RunExistsError
RunBusyError = rundir.RunBusyError
METRICS_FILE = rundir.METRICS_FILE
CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
TENSORBOARD_DIR = "tensorboard"
WORKERS_DIR = "workers"
EVAL_BATCH_SIZE = 512
OBJECTIVE = "NDCG@10"
# Above this share of repeated valid/test targets, `--candidates new` warns.
REPEAT_WARNING_SHARE = 0.05


class NonFiniteError(RuntimeError):
    """A NaN or inf loss or validation metric; the run stops at its last good
    checkpoint."""


class _StopOnNonFiniteLoss(tf.keras.callbacks.Callback):
    """Stops `fit` at the first step whose loss is NaN or inf, and notes it."""

    def __init__(self, key: str = "mean_loss"):
        super().__init__()
        self.key = key
        self.bad_step: int | None = None
        self.bad_value: float | None = None

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        value = (logs or {}).get(self.key)
        if value is not None and not math.isfinite(float(value)):
            self.bad_step, self.bad_value = batch + 1, float(value)
            self.model.stop_training = True


def build_encoder(
    config: TrainConfig | PretrainConfig, info: schema.DatasetInfo
) -> SASRecEncoder:
    """The SASRec encoder of a run (named "sasrec" in every model)."""
    return SASRecEncoder(
        num_items=info.num_items,
        max_len=info.max_len,
        hidden_size=config.hidden_size,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        seed=config.seed,
        name="sasrec",
    )


def build_model(
    config: TrainConfig, info: schema.DatasetInfo, item_counts: np.ndarray | None
) -> SequentialRetrievalModel:
    """The one model builder, for training, evaluation and tuning."""
    encoder = build_encoder(config, info)
    sampler_seed = config.seed * 7919 + 1
    k = config.num_negatives
    sampler: GenNiSampler | PopularitySampler | UniformSampler | None
    if config.loss == "softmax":
        sampler = None
    elif config.sampler == "genni":
        sampler = GenNiSampler(
            info.num_items,
            k,
            alpha=config.alpha,
            beta=beta_for_epoch(0, config.beta, config.beta_growth),
            max_logits=config.max_logits,
            beta_group=config.beta_group,
            seed=sampler_seed,
        )
    elif config.sampler == "popularity":
        if item_counts is None:
            raise ValueError("The popularity sampler needs item counts.")
        sampler = PopularitySampler(
            info.num_items, item_counts.tolist(), config.gamma, k, seed=sampler_seed
        )
    else:
        sampler = UniformSampler(info.num_items, k, seed=sampler_seed)
    model = SequentialRetrievalModel(
        encoder,
        sampler,
        loss=config.loss,
        exclude_seen=config.exclude_seen,
        alpha_step=config.alpha_step if config.sampler == "genni" else None,
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(config.learning_rate))
    model(tf.zeros([1, info.max_len], tf.int64))  # Create the variables.
    return model


class Evaluator:
    """Full-ranking metrics of a model on one split (cached input).

    `candidates`: the ranking rule of `genni.components.metrics` ("new" or "all").
    After a call, `users` and `repeat_targets` (users whose target repeats an
    item of their history) describe the split.
    """

    def __init__(
        self,
        data_dir: str,
        split: str,
        max_len: int,
        pack: bool = False,
        candidates: str = "new",
    ):
        """`pack`: run the encoder on packed batches (the same scores)."""
        self.split = split
        self.pack = pack
        self.candidates = candidates
        self.users = 0
        self.repeat_targets = 0
        self._batches = data.batches(
            data.records(data_dir, split).cache(), max_len, split, EVAL_BATCH_SIZE
        )
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


def check_dataset(config: TrainConfig, info: schema.DatasetInfo) -> None:
    """Refuse data the run cannot use right; warn when the rule matters."""
    if config.exclude_seen and info.schema_version < 2:
        raise ValueError(
            f"{config.data!r} was preprocessed by an older genni whose user items "
            "(the --exclude-seen list) hold the held-out valid and test items: run "
            "`genni preprocess` again."
        )
    if config.candidates != "new":
        return
    stats = rundir.read_json(os.path.join(config.data, schema.STATS_FILE))
    share = sequences.repeat_target_share(stats)
    if share > REPEAT_WARNING_SHARE:
        print(
            f"Warning: {100 * share:.1f}% of the valid/test targets repeat an item "
            "of the user's history and count as misses under --candidates new; "
            "use --candidates all if people consume items again in this data.",
            flush=True,
        )


def _initial_state() -> dict:
    return {
        "epoch": 0,
        "history": [],
        "best_epoch": None,
        "best_objective": None,
        "epochs_without_improvement": 0,
        "stopped_early": False,
        "checkpoint": None,
    }


def make_strategy(name: str) -> tf.distribute.Strategy | None:
    """A `tf.distribute` strategy by name (None: TensorFlow's default, no scope).

    "mirrored": `tf.distribute.MirroredStrategy` over every local GPU (the CPU
    when there is none): each batch is split over the replicas and gradients
    are all-reduced. "multi_worker": `tf.distribute.MultiWorkerMirroredStrategy`
    over the machines that TF_CONFIG names (every one runs the same command;
    gradients are all-reduced across all of their devices).
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; expected one of {STRATEGIES}.")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "--strategy multi_worker needs TF_CONFIG: the cluster's workers "
                'and this one\'s task, e.g. {"cluster": {"worker": ["host1:2222", '
                '"host2:2222"]}, "task": {"type": "worker", "index": 0}}.'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    return None


def worker_task(strategy: tf.distribute.Strategy | None) -> str | None:
    """This process's task when it is not the chief of a multi-worker cluster
    (e.g. "worker_1"), else None: the chief (or lone process) owns the run
    directory; the others keep their checkpoints apart and write no results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    cluster = resolver.cluster_spec().as_dict() if resolver is not None else {}
    if not cluster or resolver.task_type in (None, "chief"):
        return None
    first_worker = resolver.task_type == "worker" and resolver.task_id == 0
    if first_worker and "chief" not in cluster:
        return None
    return f"{resolver.task_type}_{resolver.task_id}"


def _worker_state(config: TrainConfig, resume: bool) -> dict:
    """A non-chief worker's start: the chief's saved state on --resume."""
    state_path = os.path.join(config.output, STATE_FILE)
    if resume and os.path.exists(state_path):
        return rundir.read_json(state_path)
    return _initial_state()


def train(
    config: TrainConfig,
    resume: bool = False,
    verbose: int = 1,
    strategy: tf.distribute.Strategy | None = None,
) -> dict:
    """Train, early-stop on valid NDCG@10, test the best epoch; returns metrics.

    `strategy`: a `tf.distribute.Strategy` to build and train the model under
    (None: no strategy). `config.batch_size` is then the global batch, split
    over its replicas. The strategy is how a run is executed, not part of its
    settings, but dropout and sampling draw per-replica streams: a run is
    reproducible under the strategy (and replica count) it started with.
    Raises `rundir.RunBusyError` while another process trains in
    `config.output` (the chief's claim; other workers keep their own dirs).
    """
    chief = worker_task(strategy) is None
    with rundir.claim(config.output) if chief else contextlib.nullcontext():
        return _train(config, resume, verbose, strategy)


def _train(
    config: TrainConfig,
    resume: bool,
    verbose: int,
    strategy: tf.distribute.Strategy | None,
) -> dict:
    info = schema.DatasetInfo.load(config.data)
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    if config.pack and config.exclude_seen and replicas > 1:
        raise ValueError(
            "--pack with --exclude-seen trains on one replica only: drop one of "
            "them or use --strategy default."
        )
    task = worker_task(strategy)
    if task is None:
        check_dataset(config, info)
        state = rundir.prepare(
            config.output,
            config.to_dict(),
            resume,
            _initial_state(),
            TrainConfig.defaults(),
        )
        own_dir = config.output
    else:  # The chief writes the run; this worker keeps its checkpoints apart.
        state = _worker_state(config, resume)
        own_dir = os.path.join(config.output, WORKERS_DIR, task)
    tf.keras.utils.set_random_seed(config.seed)
    counts = (
        data.item_counts(config.data, info.max_len, info.num_items)
        if config.sampler == "popularity"
        else None
    )
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = build_model(config, info, counts)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(own_dir, CHECKPOINT_DIR), max_to_keep=2
        )
        best_path = os.path.join(own_dir, BEST_DIR, "weights")
        best = tf.train.Checkpoint(model=model)
        if state["checkpoint"]:
            checkpoint.restore(state["checkpoint"]).assert_existing_objects_matched()
            print(f"Resumed {config.output} at epoch {state['epoch']}.")
        elif config.init_from:
            from genni.pipeline.training import pretrain

            loaded = pretrain.initialize(model.encoder, config)
            if verbose:
                print(
                    f"Initialized {len(loaded)} encoder weights from "
                    f"{config.init_from}."
                )

    cached_train = data.records(config.data, schema.TRAIN).cache()
    valid = Evaluator(
        config.data, schema.VALID, info.max_len, config.pack, config.candidates
    )
    writer = (
        tf.summary.create_file_writer(os.path.join(config.output, TENSORBOARD_DIR))
        if task is None
        else tf.summary.create_noop_writer()
    )
    sampler = model.sampler
    while state["epoch"] < config.epochs and not state["stopped_early"]:
        epoch = state["epoch"]
        record: dict = {"epoch": epoch + 1}
        if isinstance(sampler, GenNiSampler):
            beta = beta_for_epoch(epoch, config.beta, config.beta_growth)
            if beta != sampler.beta:
                sampler.beta = beta
                model.train_function = None  # Retrace with the new shapes.
            record["beta"] = beta
            record["num_candidates"] = sampler.num_candidates
        if verbose:
            print(f"Epoch {epoch + 1}/{config.epochs}")
        start = time.perf_counter()
        guard = _StopOnNonFiniteLoss()
        logs = model.fit(
            data.train_dataset(
                cached_train,
                info.max_len,
                config.batch_size,
                config.seed,
                epoch,
                info.num_train_examples,
                pack=config.pack,
            ),
            epochs=1,
            verbose=verbose,
            callbacks=[guard],
        ).history
        if guard.bad_step is not None:
            raise NonFiniteError(
                f"The loss became {guard.bad_value} at epoch {epoch + 1}, step "
                f"{guard.bad_step}. {_kept(config, state)}"
            )
        record["train_seconds"] = time.perf_counter() - start
        for key in ("mean_loss", "positive_score", "negative_score", "alpha"):
            if logs.get(key):
                record[key.removeprefix("mean_")] = float(logs[key][-1])
        if (epoch + 1) % config.eval_every == 0 or epoch + 1 == config.epochs:
            start = time.perf_counter()
            metrics = valid(model)
            record["eval_seconds"] = time.perf_counter() - start
            record["valid"] = metrics
            objective = metrics[OBJECTIVE]
            bad = [n for n, v in metrics.items() if not math.isfinite(v)]
            if bad:
                raise NonFiniteError(
                    f"Validation {', '.join(bad)} non-finite at epoch {epoch + 1}, "
                    f"step {int(model.optimizer.iterations)}. {_kept(config, state)}"
                )
            if state["best_objective"] is None or objective > state["best_objective"]:
                state["best_objective"] = objective
                state["best_epoch"] = epoch + 1
                state["epochs_without_improvement"] = 0
                best.write(best_path)
            else:
                state["epochs_without_improvement"] += config.eval_every
                if state["epochs_without_improvement"] >= config.patience:
                    state["stopped_early"] = True
            if verbose:
                print(
                    f"  valid HR@10 {metrics['HR@10']:.2f}  NDCG@10 "
                    f"{metrics['NDCG@10']:.2f}  (best {state['best_objective']:.2f} "
                    f"at epoch {state['best_epoch']})"
                )
        _log_epoch(writer, record)
        state["history"].append(record)
        state["epoch"] = epoch + 1
        state["checkpoint"] = manager.save(checkpoint_number=epoch + 1)
        if task is None:  # Every worker resumes from the chief's checkpoint.
            rundir.write_json(os.path.join(config.output, STATE_FILE), state)

    if state["best_epoch"] is None:
        raise NonFiniteError(f"No epoch of {config.output!r} was validated.")
    best.read(best_path).assert_existing_objects_matched()
    test = Evaluator(
        config.data, schema.TEST, info.max_len, config.pack, config.candidates
    )
    result = _finish(config, state, valid(model), test(model))
    result["repeats"] = {
        schema.VALID: valid.repeat_summary(),
        schema.TEST: test.repeat_summary(),
    }
    if task is None:
        rundir.write_json(os.path.join(config.output, METRICS_FILE), result)
    else:
        shutil.rmtree(own_dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # Other workers may still be there.
            os.rmdir(os.path.dirname(own_dir))
    return result


def _kept(config: TrainConfig, state: dict) -> str:
    """Where a stopped run stands: its last good checkpoint, and what next."""
    if not state["checkpoint"]:
        return "No epoch was checkpointed; change the settings and start again."
    return (
        f"The checkpoint of epoch {state['epoch']} is kept (best epoch "
        f"{state['best_epoch']}): lower --learning-rate or change the settings "
        f"that diverged, or `genni train ... --output {config.output} --resume` "
        "to continue from it."
    )


def _log_epoch(writer: tf.summary.SummaryWriter, record: dict) -> None:
    with writer.as_default(step=record["epoch"]):
        for key, value in record.items():
            if isinstance(value, (int, float)) and key != "epoch":
                tf.summary.scalar(key, value)
        for key, value in record.get("valid", {}).items():
            tf.summary.scalar(f"valid/{key}", value)
    writer.flush()


def _finish(config: TrainConfig, state: dict, valid: dict, test: dict) -> dict:
    """The contents of metrics.json: the run's state and the best epoch's metrics."""
    history = state["history"]
    train_s = [r["train_seconds"] for r in history]
    eval_s = [r["eval_seconds"] for r in history if "eval_seconds" in r]
    result = {
        "config": config.to_dict(),
        "best_epoch": state["best_epoch"],
        "epochs_run": state["epoch"],
        "stopped_early": state["stopped_early"],
        "valid": valid,
        "test": test,
        "seconds_per_epoch": statistics.median(train_s) if train_s else None,
        "seconds_per_eval": statistics.median(eval_s) if eval_s else None,
        "sampler_over_time": [
            {k: r[k] for k in ("epoch", "alpha", "beta", "num_candidates") if k in r}
            for r in history
        ],
        "history": history,
    }
    return result


def read_config(run_dir: str, data_dir: str | None = None) -> TrainConfig:
    """The `TrainConfig` of a run, optionally pointed at another dataset copy."""
    config_path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{config_path} not found: is {run_dir!r} a run?")
    values = rundir.read_json(config_path)
    if data_dir is not None:
        values["data"] = data_dir
    return TrainConfig.from_dict(values)


def load_run(run_dir: str, data_dir: str | None = None) -> SequentialRetrievalModel:
    """The model of a finished (or running) run, with its best weights."""
    config = read_config(run_dir, data_dir)
    info = schema.DatasetInfo.load(config.data)
    counts = np.ones(info.num_items + 1) if config.sampler == "popularity" else None
    model = build_model(config, info, counts)
    best_path = os.path.join(run_dir, BEST_DIR, "weights")
    if not tf.io.gfile.exists(best_path + ".index"):
        raise FileNotFoundError(f"{run_dir!r} has no best weights yet.")
    tf.train.Checkpoint(model=model).read(best_path).expect_partial()
    return model


def evaluate(
    run_dir: str, data_dir: str | None, split: str, candidates: str | None = None
) -> tuple[dict[str, float], dict]:
    """Full-ranking metrics of a run's best weights on `split`.

    `candidates`: the ranking rule (default: the run's). Returns the metrics
    and the split's repeated targets (`Evaluator.repeat_summary`).
    """
    model = load_run(run_dir, data_dir)
    config = read_config(run_dir, data_dir)
    info = schema.DatasetInfo.load(config.data)
    evaluator = Evaluator(
        config.data, split, info.max_len, config.pack, candidates or config.candidates
    )
    return evaluator(model), evaluator.repeat_summary()

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

The run is one `model.fit` over all of its epochs (`fit_epochs`); its
per-epoch concerns (beta schedule, validation and early stopping,
checkpoints, tensorboard) are Keras callbacks (`callbacks`).

A non-finite loss, weight or validation metric stops the run with
`NonFiniteError` (naming the epoch and step) before that epoch is validated or
checkpointed: the last good
checkpoint stays, `--resume` continues from it, and a non-finite epoch is
never the best one.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import statistics

import tensorflow as tf

from genni.components import schema
from genni.pipeline.preprocess import sequences
from genni.pipeline.training import callbacks as cb
from genni.pipeline.training import data, rundir
from genni.pipeline.training.callbacks import OBJECTIVE, NonFiniteError
from genni.pipeline.training.config import (
    STRATEGIES,
    TrainConfig,
    refuse_output_in_data,
)
from genni.pipeline.training.data import Dataset
from genni.pipeline.training.evaluate import (
    EVAL_BATCH_SIZE,
    Evaluator,
    evaluate,
    repeat_line,
)
from genni.pipeline.training.model import BEST_DIR, build_model, load_run, read_config

__all__ = [
    "EVAL_BATCH_SIZE",
    "OBJECTIVE",
    "Evaluator",
    "NonFiniteError",
    "build_model",
    "evaluate",
    "fit_epochs",
    "load_run",
    "read_config",
    "repeat_line",
    "train",
]

CONFIG_FILE = rundir.CONFIG_FILE
STATE_FILE = rundir.STATE_FILE
RunExistsError = rundir.RunExistsError
RunBusyError = rundir.RunBusyError
METRICS_FILE = rundir.METRICS_FILE
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
WORKERS_DIR = "workers"
# Above this share of repeated valid/test targets, `--candidates new` warns.
REPEAT_WARNING_SHARE = 0.05
_log_epoch = cb.log_epoch


def check_dataset(config: TrainConfig, info: schema.DatasetInfo) -> None:
    """Refuse data the run cannot use right; warn when the rule matters."""
    if config.sampler.exclude_seen and info.schema_version < 2:
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
    refuse_output_in_data(config.output, config.data)
    chief = worker_task(strategy) is None
    with rundir.claim(config.output) if chief else contextlib.nullcontext():
        return _train(config, resume, verbose, strategy)


class _Progbar(tf.keras.callbacks.ProgbarLogger):
    """Keras' progress bar, counting epochs out of the run's total."""

    def __init__(self, total_epochs: int):
        super().__init__(count_mode="steps")
        self.total_epochs = total_epochs

    def set_params(self, params: dict) -> None:
        super().set_params({**params, "epochs": self.total_epochs})


def fit_epochs(
    model: tf.keras.Model,
    config: TrainConfig,
    dataset: Dataset,
    progress: cb.Progress,
    end_epoch: int,
    callbacks: list[tf.keras.callbacks.Callback],
    verbose: int = 1,
) -> None:
    """The one training driver: epochs `progress.state["epoch"]` .. `end_epoch`,
    each epoch's batches in the order of (seed, epoch) alone, with `callbacks`
    doing the per-epoch work (`genni.pipeline.training.callbacks`).

    `EpochRecord`, the non-finite loss guard and, for GenNi, `BetaSchedule`
    run first; then Keras' progress bar (so that it ends each epoch's line
    before a callback prints), then `callbacks` in order. A callback stops
    the run with `model.stop_training`, or by raising.
    """
    state = progress.state
    before = [cb.EpochRecord(progress), cb.StopOnNonFinite(progress)]
    if model.sampler is not None and config.sampler.model_generated:
        before.append(
            cb.BetaSchedule(progress, config.sampler.beta, config.sampler.beta_growth)
        )
    progbar = [_Progbar(end_epoch)] if verbose else []
    cached = dataset.records(schema.TRAIN)
    steps = data.steps_per_epoch(dataset.num_train_examples(), config.batch_size)
    while state["epoch"] < end_epoch and not model.stop_training:
        epoch = state["epoch"]
        # One `fit` per epoch: each epoch's batches come from their own
        # dataset, shuffled by (seed, epoch), so a resumed run sees the same.
        batches = data.train_dataset(
            cached,
            dataset.max_len,
            config.batch_size,
            config.seed,
            epoch,
            pack=config.pack,
        )
        # Its length, for progress bars.
        batches = batches.apply(tf.data.experimental.assert_cardinality(steps))
        model.fit(
            batches,
            initial_epoch=epoch,
            epochs=epoch + 1,
            callbacks=[*before, *progbar, *callbacks],
            verbose=verbose,
        )
        if state["epoch"] != epoch + 1:
            raise RuntimeError(
                f"Epoch {epoch + 1} ended without a checkpoint callback."
            )


def _scored(config: TrainConfig, dataset: Dataset, **changes) -> int:
    """The items a GenNi draw of `config`, with `changes`, scores on `dataset`."""
    sampler = config.sampler.replace(**changes)
    positions = dataset.positions_per_step(config.batch_size)
    return sampler.scored_candidates(dataset.num_items, positions)


def _budget_unused(config: TrainConfig, dataset: Dataset) -> bool:
    """Whether `draw_budget` leaves GenNi's candidates as `max_candidates` has
    them on `dataset` (every item, for a cap at or above the catalog)."""
    return _scored(config, dataset) == _scored(config, dataset, draw_budget=None)


def _say_candidates(model, config: TrainConfig, dataset: Dataset) -> None:
    """One line on what a GenNi draw scores, when a cap or budget bites."""
    sampler = model.sampler
    if sampler is None or not config.sampler.model_generated:
        return
    if sampler.clusters is not None:
        print(
            f"GenNi draws from {sampler.clusters:,} clusters of "
            f"{dataset.num_items:,} items: {sampler.cluster_samples} candidates "
            "a position, resampled by their scores (--clusters).",
            flush=True,
        )
        return
    m, n = sampler.num_candidates, dataset.num_items
    if m >= _scored(config, dataset, max_candidates=None, draw_budget=None):
        return
    settings = config.sampler
    why = (
        f"--max-candidates {settings.max_candidates:,}"
        if settings.max_candidates
        else ""
    )
    if m < _scored(config, dataset, draw_budget=None):
        positions = dataset.positions_per_step(config.batch_size)
        why = (
            f"--draw-budget {settings.draw_budget:,} over {positions:,.0f} "
            "positions a step"
        )
    extra = (
        f", and each position's input item and its {settings.successors} most "
        "frequent successors (--successors)"
        if sampler.num_extra
        else ""
    )
    print(f"GenNi scores {m:,} of {n:,} items per draw ({why}){extra}.", flush=True)


def _train(
    config: TrainConfig,
    resume: bool,
    verbose: int,
    strategy: tf.distribute.Strategy | None,
) -> dict:
    dataset = Dataset.open(config.data)
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    if config.pack and config.sampler.exclude_seen and replicas > 1:
        raise ValueError(
            "--pack with --exclude-seen trains on one replica only: drop one of "
            "them or use --strategy default."
        )
    task = worker_task(strategy)
    if task is None:
        check_dataset(config, dataset.info)
        defaults = TrainConfig.defaults()
        cap, budget = config.sampler.max_candidates, config.sampler.draw_budget
        if cap and dataset.num_items <= cap:
            # A cap at or above the catalog never bites: a run started before
            # the cap existed (the preset's, since) resumes under it.
            defaults["max_candidates"] = cap
        if budget and _budget_unused(config, dataset):
            # Likewise a budget that leaves the candidates as they were.
            defaults["draw_budget"] = budget
        state = rundir.prepare(
            config.output, config.to_dict(), resume, _initial_state(), defaults
        )
        own_dir = config.output
    else:  # The chief writes the run; this worker keeps its checkpoints apart.
        state = _worker_state(config, resume)
        own_dir = os.path.join(config.output, WORKERS_DIR, task)
    tf.keras.utils.set_random_seed(config.seed)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = build_model(config, dataset)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(own_dir, CHECKPOINT_DIR), max_to_keep=2
        )
        best_path = os.path.join(own_dir, BEST_DIR, "weights")
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
        elif config.warm_start:
            from genni.pipeline.training import warm_start

            started = warm_start.initialize(model.encoder, config)
            if verbose:
                print(
                    f"Warm-started from {config.warm_start}: its "
                    f"{started['items']:,} items, {started['new_items']:,} new "
                    f"({config.warm_start_rows} rows).",
                    flush=True,
                )

    if verbose:
        _say_candidates(model, config, dataset)
    valid = (
        Evaluator(dataset, schema.VALID, config.pack, config.candidates)
        if config.validation
        else None
    )
    writer = (
        tf.summary.create_file_writer(os.path.join(config.output, TENSORBOARD_DIR))
        if task is None
        else tf.summary.create_noop_writer()
    )
    progress = cb.Progress(state, config.output)
    model.stop_training = state["stopped_early"]
    fit_epochs(
        model,
        config,
        dataset,
        progress,
        config.epochs,
        [
            cb.Validation(
                progress,
                valid,
                best_path,
                config.eval_every,
                config.patience,
                config.epochs,
                verbose,
                config.patience_growth,
                config.step_floor,
            )
            if valid is not None
            else cb.LastEpoch(progress, best_path),
            cb.EpochCheckpoint(
                progress,
                manager,
                # Every worker resumes from the chief's checkpoint.
                os.path.join(config.output, STATE_FILE) if task is None else None,
                # Looked up at each epoch's end, so tests can stand in.
                log=lambda record: _log_epoch(writer, record),
            ),
        ],
        verbose,
    )
    if state["best_epoch"] is None:
        raise NonFiniteError(f"No epoch of {config.output!r} was validated.")
    tf.train.Checkpoint(model=model).read(best_path).assert_existing_objects_matched()
    if valid is None:  # A refit: nothing held out to measure.
        result = _finish(config, state, {}, {})
    else:
        test = Evaluator(
            dataset, schema.TEST, config.pack, config.candidates, by_target=True
        )
        result = _finish(config, state, valid(model), test(model))
        result["repeats"] = {
            schema.VALID: valid.repeat_summary(),
            schema.TEST: test.repeat_summary(),
        }
        if test.by_target:  # Some test target was never trained on.
            from genni.pipeline.training.cold import by_target_with_baseline

            result["test_by_target"] = by_target_with_baseline(
                test.by_target, dataset, schema.TEST
            )
    stats = rundir.read_json(os.path.join(config.data, schema.STATS_FILE))
    result["cases"] = window_cases(stats)
    if dataset.info.split == schema.TIME_SPLIT and valid is not None:
        result["new_item_targets"] = {
            s: stats["time_split"][f"{s}_new_item_share"]
            for s in (schema.VALID, schema.TEST)
        }
    if valid is not None and not result["validation_signal"]:
        print(f"Warning: {no_signal_message(result)}; {NOT_PUBLISHED}", flush=True)
    if task is None:
        rundir.write_json(os.path.join(config.output, METRICS_FILE), result)
    else:
        shutil.rmtree(own_dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # Other workers may still be there.
            os.rmdir(os.path.dirname(own_dir))
    return result


def window_cases(stats: dict) -> dict:
    """`metrics.json`'s `cases`: each held-out split's cases and scoreable
    cases (a target the vocabulary knows; under leave-one-out, every one)."""
    from genni.pipeline.preprocess import windows

    window = stats.get("time_split")
    cases = {}
    for split in (schema.VALID, schema.TEST):
        if window:
            total, known = window[f"{split}_cases"], windows.scoreable(stats, split)
        else:
            total = known = stats["examples"][split]
        cases[split] = {"cases": total, "scoreable": known}
    return cases


NOT_PUBLISHED = "the guarded export (`genni pipeline`) does not publish this run."


def no_signal_message(metrics: dict) -> str:
    """Why a run whose validation never hit is not to be trusted."""
    valid = metrics["cases"][schema.VALID]
    return (
        "no validation case was ranked in the top 10 at any epoch "
        f"({valid['scoreable']:,} scoreable of {valid['cases']:,} validation "
        "cases): the best epoch "
        f"({metrics['best_epoch']}) was chosen on no signal"
    )


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
        # Whether the best epoch was chosen on something: some validated epoch
        # ranked a validation target in the top 10 (`no_signal_message`).
        "validation_signal": any(
            r["valid"].get(OBJECTIVE, 0.0) > 0 for r in history if "valid" in r
        ),
        # A run is finished when its metrics.json is written (rundir.finished).
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return result

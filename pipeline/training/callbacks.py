"""The per-epoch concerns of a training run, as Keras callbacks.

`genni train` is one `model.fit` over all of its epochs (`train.fit_epochs`);
what happens around the steps is a callback each, sharing the run's `Progress`
(its `state.json` contents and the record of the epoch under way):

| callback          | when             | what                                        |
|-------------------|------------------|---------------------------------------------|
| `EpochRecord`     | epoch begin/end  | starts the epoch's record, times it, keeps  |
|                   |                  | its loss and score means                    |
| `BetaSchedule`    | epoch begin      | GenNi's beta for the epoch (retraces)       |
| `StopOnNonFinite` | batch/epoch end  | a NaN/inf loss or weight stops the run      |
| `Validation`      | epoch end        | valid metrics, the best weights, early stop |
| `EpochCheckpoint` | epoch end (last) | tensorboard, history, checkpoint, state.json |

The case study of `python -m research.report` adds its own callback to the same driver.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import tensorflow as tf

from genni.components.schedules import beta_for_epoch
from genni.pipeline.training import rundir

OBJECTIVE = "NDCG@10"
RECORDED_LOGS = ("mean_loss", "positive_score", "negative_score", "alpha")


class NonFiniteError(RuntimeError):
    """A NaN or inf loss or validation metric; the run stops at its last good
    checkpoint."""


class Progress:
    """What the callbacks of one run share: `state` (saved as state.json at
    each checkpoint: epoch, history, best epoch, early stopping) and `record`,
    the epoch under way's entry of `state["history"]`."""

    def __init__(self, state: dict, output: str = ""):
        self.state = state
        self.output = output
        self.record: dict = {}

    def kept(self) -> str:
        """Where a stopped run stands: its last good checkpoint, and what next."""
        state = self.state
        if not state.get("checkpoint"):
            return "No epoch was checkpointed; change the settings and start again."
        return (
            f"The checkpoint of epoch {state['epoch']} is kept (best epoch "
            f"{state.get('best_epoch')}): lower --learning-rate or change the "
            f"settings that diverged, or `genni train ... --output {self.output} "
            "--resume` to continue from it."
        )


class EpochRecord(tf.keras.callbacks.Callback):
    """Starts each epoch's record; at its end, the training time and the
    epoch means of the loss and the positive/negative scores (and alpha)."""

    def __init__(self, progress: Progress):
        super().__init__()
        self.progress = progress
        self._start = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.progress.record = {"epoch": epoch + 1}
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        record = self.progress.record
        record["train_seconds"] = time.perf_counter() - self._start
        for key in RECORDED_LOGS:
            if (logs or {}).get(key):
                record[key.removeprefix("mean_")] = float(logs[key])


class BetaSchedule(tf.keras.callbacks.Callback):
    """GenNi's beta for each epoch (fixed, or the growing schedule); a new
    beta changes the draw's shapes, so the train step is traced again."""

    def __init__(self, progress: Progress, beta: float, growth: float | None):
        super().__init__()
        self.progress = progress
        self.beta = beta
        self.growth = growth

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        sampler = self.model.sampler
        beta = beta_for_epoch(epoch, self.beta, self.growth)
        if beta != sampler.beta:
            sampler.beta = beta
            self.model.train_function = self.model.make_train_function(force=True)
        self.progress.record["beta"] = beta
        self.progress.record["num_candidates"] = sampler.num_candidates


class StopOnNonFinite(tf.keras.callbacks.Callback):
    """Stops the run at the first step whose loss is NaN or inf, and at the
    end of an epoch whose weights hold a NaN or inf (a last step can break
    them with a finite loss), before the epoch is validated or checkpointed
    (`NonFiniteError` names the epoch and step)."""

    def __init__(self, progress: Progress, key: str = "mean_loss"):
        super().__init__()
        self.progress = progress
        self.key = key

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        value = (logs or {}).get(self.key)
        if value is not None and not math.isfinite(float(value)):
            raise NonFiniteError(
                f"The loss became {float(value)} at epoch "
                f"{self.progress.record['epoch']}, step {batch + 1}. "
                f"{self.progress.kept()}"
            )

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        bad = non_finite_weights(self.model)
        if bad:
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            raise NonFiniteError(
                f"The weights became non-finite ({', '.join(bad[:3])}{more}) at "
                f"epoch {epoch + 1}, step {int(self.model.optimizer.iterations)}. "
                f"{self.progress.kept()}"
            )


def non_finite_weights(model: tf.keras.Model) -> list[str]:
    """Names of the model's floating-point weights that hold a NaN or inf."""
    return [
        weight.name
        for weight in model.weights
        if weight.dtype.is_floating
        and not bool(tf.reduce_all(tf.math.is_finite(weight)))
    ]


class Validation(tf.keras.callbacks.Callback):
    """Every `every` epochs (and at the last): the valid metrics, the best
    weights at the best NDCG@10 (written to `best_path`), early stopping
    after `patience_limit` epochs without a better one: `patience`, or
    `patience_growth` x the best epoch when that is more, and never before
    `min_steps` optimizer steps (None: no floor). A non-finite metric stops
    the run (`NonFiniteError`): a non-finite epoch is never the best.

    `evaluate(model)` gives the metrics (an `evaluate.Evaluator`).
    """

    def __init__(
        self,
        progress: Progress,
        evaluate: Callable[[tf.keras.Model], dict],
        best_path: str,
        every: int,
        patience: int,
        epochs: int,
        verbose: int = 1,
        patience_growth: float = 0.0,
        min_steps: int | None = None,
    ):
        super().__init__()
        self.progress = progress
        self.min_steps = min_steps
        self.evaluate = evaluate
        self.best_path = best_path
        self.every = every
        self.patience = patience
        self.patience_growth = patience_growth
        self.epochs = epochs
        self.verbose = verbose
        self._best: tf.train.Checkpoint | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if (epoch + 1) % self.every and epoch + 1 != self.epochs:
            return
        state, record = self.progress.state, self.progress.record
        start = time.perf_counter()
        metrics = self.evaluate(self.model)
        record["eval_seconds"] = time.perf_counter() - start
        record["valid"] = metrics
        bad = [name for name, value in metrics.items() if not math.isfinite(value)]
        if bad:
            raise NonFiniteError(
                f"Validation {', '.join(bad)} non-finite at epoch {epoch + 1}, step "
                f"{int(self.model.optimizer.iterations)}. {self.progress.kept()}"
            )
        objective = metrics[OBJECTIVE]
        if state["best_objective"] is None or objective > state["best_objective"]:
            state["best_objective"] = objective
            state["best_epoch"] = epoch + 1
            state["epochs_without_improvement"] = 0
            if self._best is None:
                self._best = tf.train.Checkpoint(model=self.model)
            self._best.write(self.best_path)
        else:
            state["epochs_without_improvement"] += self.every
            floor = self.min_steps is not None and self.min_steps > int(
                # A mirrored variable under tf.distribute: read its value.
                tf.keras.backend.get_value(self.model.optimizer.iterations)
            )
            if state["epochs_without_improvement"] >= self.patience_limit and not floor:
                state["stopped_early"] = True
                self.model.stop_training = True
        if self.verbose:
            print(
                f"  valid HR@10 {metrics['HR@10']:.2f}  NDCG@10 "
                f"{metrics['NDCG@10']:.2f}  (best {state['best_objective']:.2f} "
                f"at epoch {state['best_epoch']})",
                flush=True,
            )

    @property
    def patience_limit(self) -> float:
        """Epochs without a better one that stop the run, now."""
        best = self.progress.state["best_epoch"] or 0
        return patience_limit(self.patience, self.patience_growth, best)


class LastEpoch(tf.keras.callbacks.Callback):
    """For a run with no validation (`--no-validation`): every epoch's weights
    are the run's best so far, so its last epoch's are its own."""

    def __init__(self, progress: Progress, best_path: str):
        super().__init__()
        self.progress = progress
        self.best_path = best_path
        self._best: tf.train.Checkpoint | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        state = self.progress.state
        state["best_epoch"] = epoch + 1
        if self._best is None:
            self._best = tf.train.Checkpoint(model=self.model)
        self._best.write(self.best_path)


def patience_limit(patience: int, growth: float, best_epoch: int) -> float:
    """Epochs without a better validation that stop a run whose best epoch so
    far is `best_epoch` (0: none): `patience`, or `growth` x the best epoch
    when that is more."""
    return max(patience, growth * best_epoch)


class EpochCheckpoint(tf.keras.callbacks.Callback):
    """Closes each epoch: its record to tensorboard and the history, then a
    checkpoint (model, optimizer, every random generator) and, when
    `state_path` is set, state.json naming it. A killed run resumes here.

    `log(record)`: where the record goes first (e.g. `log_epoch` to a
    tensorboard writer).
    """

    def __init__(
        self,
        progress: Progress,
        manager: tf.train.CheckpointManager,
        state_path: str | None,
        log: Callable[[dict], None] | None = None,
    ):
        super().__init__()
        self.progress = progress
        self.manager = manager
        self.state_path = state_path
        self.log = log

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        state, record = self.progress.state, self.progress.record
        if self.log is not None:
            self.log(record)
        state.setdefault("history", []).append(record)
        state["epoch"] = epoch + 1
        state["checkpoint"] = self.manager.save(checkpoint_number=epoch + 1)
        if self.state_path is not None:
            rundir.write_json(self.state_path, state)


def log_epoch(writer: tf.summary.SummaryWriter, record: dict) -> None:
    """An epoch's record as tensorboard scalars (valid metrics as valid/...)."""
    with writer.as_default(step=record["epoch"]):
        for key, value in record.items():
            if isinstance(value, (int, float)) and key != "epoch":
                tf.summary.scalar(key, value)
        for key, value in record.get("valid", {}).items():
            tf.summary.scalar(f"valid/{key}", value)
    writer.flush()

"""The case study: the negatives GenNi would draw for a few users as training
goes on. It trains a model of its own, epoch by epoch, checkpointed in
`REPORT_DIR/case_study_checkpoint` so that a killed report picks it up again,
and writes `REPORT_DIR/case_study.json`.
"""

from __future__ import annotations

import os
import shutil

from genni.components import schema
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig
from research.grid import Grid

CASE_STUDY_FILE = "case_study.json"
# The case study's checkpoint and points so far, removed once it is written.
CASE_STUDY_CHECKPOINT = "case_study_checkpoint"


def case_study(config: TrainConfig, grid: Grid, output: str, verbose: int = 0) -> dict:
    """The negatives GenNi would draw for a few users as training goes on.

    Trains a GenNi model (the grid's main configuration, seed 0) epoch by
    epoch; at each of `grid.case_epochs` it takes the first users of the
    validation split and lists the items with the highest probability under
    GenNi's Q(i | h_t) = softmax(alpha * h_t . e_i) over items but the target
    (and the user's earlier items when the run excludes them, `exclude_seen`),
    with their scores, beside the target's own score and rank.
    """
    import tensorflow as tf

    from genni.pipeline.training import callbacks, data, train

    path = os.path.join(output, CASE_STUDY_FILE)
    if os.path.exists(path):
        return rundir.read_json(path)
    dataset = data.Dataset.open(config.data)
    tf.keras.utils.set_random_seed(config.seed)
    model = train.build_model(config, dataset)
    # A run directory of its own, checkpointed every epoch: a killed report
    # picks the case study up again (with the same settings only).
    checkpoint_dir = os.path.join(output, CASE_STUDY_CHECKPOINT)
    state = rundir.prepare(
        checkpoint_dir,
        config.to_dict(),
        True,
        {"epoch": 0, "points": [], "checkpoint": None},
    )
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=model.optimizer),
        checkpoint_dir,
        max_to_keep=2,  # The state file may still name the one before the last.
    )
    if state["epoch"]:
        manager.checkpoint.restore(
            state["checkpoint"]
        ).assert_existing_objects_matched()
    epochs = max(grid.case_epochs)
    if verbose:
        resumed = f", resumed at epoch {state['epoch']}" if state["epoch"] else ""
        print(f"Case study: training GenNi for {epochs} epochs{resumed}, {path}")
    progress = callbacks.Progress(state, checkpoint_dir)
    train.fit_epochs(
        model,
        config,
        dataset,
        progress,
        epochs,
        [
            case_study_callback(progress, dataset, config, grid),
            callbacks.EpochCheckpoint(
                progress,
                manager,
                os.path.join(checkpoint_dir, rundir.STATE_FILE),
            ),
        ],
        verbose=0,
    )
    points = state["points"]
    result = {
        "alpha": config.sampler.alpha,
        "exclude_seen": config.sampler.exclude_seen,
        "points": points,
    }
    rundir.write_json(path, result)
    shutil.rmtree(checkpoint_dir)
    return result


def case_study_callback(progress, dataset, config: TrainConfig, grid: Grid):
    """The case study as a callback of the training driver: at each of
    `grid.case_epochs`, GenNi's top negatives for the first validation users,
    added to `progress.state["points"]`."""
    import tensorflow as tf

    class _CaseStudy(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.valid = next(iter(dataset.batches(schema.VALID, grid.case_users)))
            # Raw ids, as in the logs: element n of each list is id n.
            self.items = dataset.ids(schema.ITEMS_FILE)
            self.users = dataset.ids(schema.USERS_FILE)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            if epoch + 1 in grid.case_epochs:
                progress.state["points"].append(
                    {
                        "epoch": epoch + 1,
                        "users": _case_users(
                            self.model, self.valid, self.items, self.users, config
                        ),
                    }
                )

    return _CaseStudy()


def _case_users(
    model, valid: dict, items: list[str], users: list[str], config: TrainConfig
) -> list:
    """GenNi's top negatives for each of the `valid` users, with the target."""
    import numpy as np

    scores = model(valid[schema.INPUT_IDS]).numpy()  # (U, V + 1)
    found = []
    for row, target in enumerate(valid[schema.TARGET].numpy()):
        s = scores[row].astype(np.float64)
        logits = config.sampler.alpha * s
        logits[0] = -np.inf
        if config.sampler.exclude_seen:  # As the sampler: never the user's own items.
            logits[valid[schema.HISTORY][row].numpy()] = -np.inf
        logits[target] = -np.inf
        q = np.exp(logits - logits[np.isfinite(logits)].max())
        q /= q.sum()
        top = np.argsort(-q)[:5]
        found.append(
            {
                "user": users[valid[schema.USER_ID].numpy()[row]],
                "target": items[target],
                "target_score": float(s[target]),
                "target_rank": int((s[1:] > s[target]).sum()) + 1,
                "negatives": [
                    {
                        "item": items[i],
                        "score": float(s[i]),
                        "probability": float(q[i]),
                    }
                    for i in top
                ],
            }
        )
    return found

"""The case study: the negatives GenNi would draw for a few users as training
goes on. It trains a model of its own, epoch by epoch, checkpointed in
`REPORT_DIR/case_study_checkpoint` so that a killed report picks it up again,
and writes `REPORT_DIR/case_study.json`.
"""

from __future__ import annotations

import os
import shutil

from genni.components import schema
from genni.pipeline.reproduce.grid import Grid
from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig

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

    from genni.pipeline.training import data, train

    path = os.path.join(output, CASE_STUDY_FILE)
    if os.path.exists(path):
        return rundir.read_json(path)
    info = schema.DatasetInfo.load(config.data)
    tf.keras.utils.set_random_seed(config.seed)
    model = train.build_model(config, info, None)
    # A run directory of its own, checkpointed every epoch: a killed report
    # picks the case study up again (with the same settings only).
    checkpoint_dir = os.path.join(output, CASE_STUDY_CHECKPOINT)
    state = rundir.prepare(
        checkpoint_dir, config.to_dict(), True, {"epoch": 0, "points": []}
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
    # Raw ids, as in the logs: line n of each file is id n (0 is padding).
    items, users = (
        ["", *_lines(os.path.join(config.data, name))]
        for name in (schema.ITEMS_FILE, schema.USERS_FILE)
    )
    valid = next(
        iter(
            data.batches(
                data.records(config.data, schema.VALID),
                info.max_len,
                schema.VALID,
                grid.case_users,
            )
        )
    )
    cached = data.records(config.data, schema.TRAIN).cache()
    points = state["points"]
    epochs = max(grid.case_epochs)
    if verbose:
        resumed = f", resumed at epoch {state['epoch']}" if state["epoch"] else ""
        print(f"Case study: training GenNi for {epochs} epochs{resumed}, {path}")
    progress = tf.keras.utils.Progbar(epochs, verbose=verbose, unit_name="epoch")
    if state["epoch"]:
        progress.update(state["epoch"])
    for epoch in range(state["epoch"], epochs):
        model.fit(
            data.train_dataset(
                cached,
                info.max_len,
                config.batch_size,
                config.seed,
                epoch,
                pack=config.pack,
            ),
            epochs=1,
            verbose=0,
        )
        progress.update(epoch + 1)
        if epoch + 1 in grid.case_epochs:
            points.append(
                {
                    "epoch": epoch + 1,
                    "users": _case_users(model, valid, items, users, config),
                }
            )
        state = {"epoch": epoch + 1, "points": points, "checkpoint": manager.save()}
        rundir.write_json(os.path.join(checkpoint_dir, rundir.STATE_FILE), state)
    result = {
        "alpha": config.alpha,
        "exclude_seen": config.exclude_seen,
        "points": points,
    }
    rundir.write_json(path, result)
    shutil.rmtree(checkpoint_dir)
    return result


def _lines(path: str) -> list[str]:
    with open(path) as f:
        return [line.rstrip("\n") for line in f]


def _case_users(
    model, valid: dict, items: list[str], users: list[str], config: TrainConfig
) -> list:
    """GenNi's top negatives for each of the `valid` users, with the target."""
    import numpy as np

    scores = model(valid[schema.INPUT_IDS]).numpy()  # (U, V + 1)
    found = []
    for row, target in enumerate(valid[schema.TARGET].numpy()):
        s = scores[row].astype(np.float64)
        logits = config.alpha * s
        logits[0] = -np.inf
        if config.exclude_seen:  # As the sampler: never the user's own items.
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

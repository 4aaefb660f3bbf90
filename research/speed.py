"""Training-step time of several configurations, measured side by side.

Each configuration gets its own model; after tracing and a warm-up, their
steps run interleaved round by round in one process on the same batches, so
whatever else the machine is doing slows all of them alike and the ratios
between them are fair. Used by `benchmarks/sampler_speed.py` and by the
efficiency table of `genni report` (`measure_speed`, written to
`REPORT_DIR/speed.json`).
"""

from __future__ import annotations

import math
import os
import statistics
import time

from genni.pipeline.training import rundir
from genni.pipeline.training.config import TrainConfig
from research.grid import Grid, experiments

SPEED_FILE = "speed.json"
# Timed side by side; growing beta costs what its current beta costs.
TIMED = ("uniform", "genni beta 0.1", "genni beta 1")


def step_times(
    data_dir: str,
    configs: dict[str, dict],
    rounds: int = 5,
    steps: int = 10,
    verbose: bool = True,
    num_items: int | None = None,
) -> dict[str, list[float]]:
    """Seconds per training step of each configuration, one entry per round.

    Args:
        data_dir: output of `genni preprocess`.
        configs: name -> `TrainConfig` overrides (sampler, alpha, beta, ...).
        rounds: interleaved rounds; take the median over them.
        steps: training steps per configuration and round (the first `steps`
            batches of the training split, the same for every configuration).
        verbose: print each round's times.
        num_items: a catalog of this many items instead of the dataset's (the
            embedding table and the samplers grown or cut to it; the same
            batches, whose ids must lie within it), to time a larger shop's
            steps on the batches of a smaller one.
    """
    import dataclasses

    import tensorflow as tf

    from genni.components import schema
    from genni.pipeline.training import data, train

    if rounds < 1 or steps < 1:
        raise ValueError(f"rounds and steps must be positive. Got {rounds}, {steps}.")
    dataset = data.Dataset.open(data_dir)
    if num_items is not None:
        if num_items < dataset.num_items:
            raise ValueError(
                f"num_items ({num_items}) must hold the dataset's "
                f"{dataset.num_items} items."
            )
        dataset = data.Dataset(dataclasses.replace(dataset.info, num_items=num_items))
    step_fns = {}
    batches: dict[tuple[int, bool], list] = {}  # The same batches for all.
    for name, overrides in configs.items():
        config = TrainConfig.of(data=data_dir, output="", **overrides)
        key = (config.batch_size, config.pack)
        if key not in batches:
            batches[key] = list(
                data.train_dataset(
                    dataset.records(schema.TRAIN),
                    dataset.max_len,
                    config.batch_size,
                    0,
                    0,
                    pack=config.pack,
                ).take(steps)
            )
        model = train.build_model(config, dataset)
        fn = tf.function(model.train_step, reduce_retracing=True)
        for batch in batches[key]:  # Trace and warm up.
            fn(batch)
        step_fns[name] = (fn, batches[key])
    times: dict[str, list[float]] = {name: [] for name in configs}
    for r in range(rounds):
        for name, (fn, steps_batches) in step_fns.items():
            start = time.perf_counter()
            for batch in steps_batches:
                logs = fn(batch)
            float(logs["mean_loss"])  # Wait for the last step.
            times[name].append((time.perf_counter() - start) / len(steps_batches))
        if verbose:
            print(
                f"  round {r + 1}: "
                + ", ".join(f"{n} {1000 * t[-1]:.0f} ms/step" for n, t in times.items())
            )
    return times


def measure_speed(data: str, grid: Grid, output: str) -> dict:
    """Step time of the efficiency table's samplers, side by side in one process.

    The runs' own epoch times depend on what else shared the machine; these do
    not (their ratios at least). Written to `REPORT_DIR/speed.json`.
    """
    from genni.components import schema

    configs = dict(experiments(grid)["efficiency"])
    times = step_times(
        data,
        {label: dict(configs[label], pack=grid.pack) for label in TIMED},
        grid.speed_rounds,
        grid.speed_steps,
        verbose=False,
    )
    info = schema.DatasetInfo.load(data)
    batch_size = TrainConfig.of(data=data, output="").batch_size
    result = {
        "ms_per_step": {
            label: 1000 * statistics.median(t) for label, t in times.items()
        },
        "steps_per_epoch": math.ceil((info.num_train_examples or 0) / batch_size),
        "batch_size": batch_size,
        "rounds": grid.speed_rounds,
        "steps": grid.speed_steps,
        "cpus": os.cpu_count(),
    }
    os.makedirs(output, exist_ok=True)
    rundir.write_json(os.path.join(output, SPEED_FILE), result)
    return result


def seconds_per_epoch(speed: dict, label: str) -> float:
    """An epoch of `label` at its side-by-side step time."""
    return speed["ms_per_step"][label] * speed["steps_per_epoch"] / 1000

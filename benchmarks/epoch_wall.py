"""An epoch's wall time with tf.data's autotuner on and off, side by side.

`genni train` runs one `model.fit` per epoch on that epoch's own dataset
(`train.fit_epochs`). With tf.data's autotuning on, the dataset iterator's
destructor waits on its optimization thread's timed sleep (up to 60 s) before
`fit` returns; the project's datasets switch it off (`data.quiet_options`).
This benchmark trains one model epoch after epoch, alternating the two
settings round by round on the same batches, and splits each epoch's wall
time into its steps (fit's first batch to `on_train_end`) and what follows
until `fit` returns.

    python benchmarks/epoch_wall.py [--data DIR] [--rounds 3] [--steps N]

--steps cuts each epoch to its first N batches (default: whole epochs).
"""

from __future__ import annotations

import statistics
import tempfile
import time

from _common import beauty_data, publish, timing_parser

ARMS = ("autotune off (project)", "autotune on (tf.data default)")


class _Ends:
    """Timestamps of one `fit`: when its training began and ended."""

    def __init__(self):
        import tensorflow as tf

        self.begin = self.end = 0.0
        self.callback = tf.keras.callbacks.LambdaCallback(
            on_train_begin=lambda logs: self._mark("begin"),
            on_train_end=lambda logs: self._mark("end"),
        )

    def _mark(self, which: str) -> None:
        setattr(self, which, time.perf_counter())


def epoch_walls(data_dir: str, rounds: int, steps: int | None, pack: bool) -> dict:
    """{arm: [{"wall", "train", "after"} per round]} for the default preset."""
    import tensorflow as tf
    from absl import logging

    from genni.components import schema
    from genni.pipeline.training import data, train
    from genni.pipeline.training.config import TrainConfig

    logging.set_verbosity(logging.ERROR)  # "Changing the value of option ...".
    config = TrainConfig.of(data=data_dir, output="", pack=pack)
    dataset = data.Dataset.open(data_dir)
    model = train.build_model(config, dataset)
    cached = dataset.records(schema.TRAIN)
    autotune = tf.data.Options()
    autotune.autotune.enabled = True
    times: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    epoch = 0
    for r in range(-1, rounds):  # Round -1 traces and warms up, untimed.
        for arm in ARMS:
            batches = data.train_dataset(
                cached, dataset.max_len, config.batch_size, 0, epoch, pack=pack
            )
            if arm == ARMS[1]:
                batches = batches.with_options(autotune)
            if steps:
                batches = batches.take(steps)
            ends = _Ends()
            start = time.perf_counter()
            model.fit(batches, epochs=1, verbose=0, callbacks=[ends.callback])
            done = time.perf_counter()
            epoch += 1
            if r < 0:
                continue
            times[arm].append(
                {
                    "wall": done - start,
                    "train": ends.end - ends.begin,
                    "after": done - ends.end,
                }
            )
            print(
                f"  round {r + 1}, {arm}: wall {done - start:.1f} s, steps "
                f"{ends.end - ends.begin:.1f} s, after the last step "
                f"{done - ends.end:.1f} s",
                flush=True,
            )
    return times


def main(argv: list[str] | None = None) -> int:
    parser = timing_parser(__doc__, rounds=3)
    parser.set_defaults(steps=None)  # Whole epochs.
    parser.add_argument(
        "--no-pack", dest="pack", action="store_false", help="Unpacked batches."
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data or beauty_data(tmp, synthetic=True)
        times = epoch_walls(data_dir, args.rounds, args.steps, args.pack)
    median = {
        arm: {key: statistics.median(t[key] for t in runs) for key in runs[0]}
        for arm, runs in times.items()
    }
    base = median[ARMS[0]]
    lines = [
        "# An epoch's wall time, tf.data autotuning off and on",
        "",
        f"Default preset, {'packed' if args.pack else 'unpacked'} batches, "
        f"{'whole epochs' if not args.steps else f'{args.steps} steps an epoch'}, "
        f"median of {args.rounds} interleaved rounds on one model; data "
        f"`{args.data or 'Beauty'}`.",
        "",
        "| tf.data | wall s | steps s | after last step s | wall x off |",
        "|---|---|---|---|---|",
    ]
    for arm, m in median.items():
        lines.append(
            f"| {arm} | {m['wall']:.1f} | {m['train']:.1f} | {m['after']:.1f} "
            f"| {m['wall'] / base['wall']:.2f} |"
        )
    publish("epoch_wall", lines, {"seconds": times, "median": median})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

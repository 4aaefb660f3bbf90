"""`genni batch-recommend`: the top k items for every user of a log, on Beam.

The pipeline reads the `sequences.tsv` of a preprocessed dataset or raw review
logs in any format `genni preprocess` reads, and groups them into per-user
histories exactly as preprocessing does (`ReadLogs`, `ParseReviews` and the
ordering of `BuildUserSequences`: duplicates dropped, time order, ties by item
id); malformed lines go to the dead-letter output with their reason. No k-core
filter: every user with a valid record gets an answer.

Recommendations come from Beam's RunInference (`apache_beam.ml.inference`)
over the exported SavedModel's `top_k` signature: the graph that serves, so a
user's batch answer is the server's answer for the same history. The model is
loaded once per worker (RunInference keeps it in Beam's shared handle), and
users travel to it in batches of up to --batch-size. A history with no item the
model knows gets the export's fallback, the most popular items, and is marked
`"popular_fallback": true`.

Output, written to a staging directory and moved into place when complete:

    OUT/recommendations-SSSSS-of-NNNNN.jsonl   {"user", "items", "scores"}
    OUT/dead_letter/dead_letter-*.jsonl         malformed input lines
    OUT/summary.json                            counts, model, timing
    OUT/_SUCCESS                                written last, if any user was

Items and scores are in rank order; a user whose history covers nearly the
whole catalog under the "new" rule may get fewer than k. DirectRunner is the
default; any runner by Beam's own flags, as for `genni preprocess`.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference import base as inference

from genni.components import schema
from genni.pipeline.beam_options import pipeline_options
from genni.pipeline.preprocess import beam as preprocess
from genni.pipeline.preprocess import formats, inmemory, outputs, sequences
from genni.pipeline.serving import export, repository

RECOMMENDATIONS_PREFIX = "recommendations"
SUMMARY_FILE = "summary.json"
SUCCESS_FILE = "_SUCCESS"
DEFAULT_BATCH_SIZE = 256
PROGRESS_SECONDS = 10.0
USERS_WRITTEN = "users_written"
POPULAR_FALLBACK = "users_popular_fallback"


@dataclass(frozen=True)
class BatchConfig:
    """What `genni batch-recommend` runs; see the module docstring."""

    model: str
    input: str
    output: str
    k: int = export.DEFAULT_K
    format: str = formats.AUTO
    min_rating: float | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    num_shards: int = 0  # 0: the runner decides.
    overwrite: bool = False


def resolve_model(path: str) -> tuple[str, int | None]:
    """MODEL_BASE/VERSION itself, or the highest version under MODEL_BASE.

    Returns (SavedModel directory, version or None when `path` is one).
    """
    if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        name = os.path.basename(os.path.normpath(path))
        return path, int(name) if repository.is_version(name) else None
    versions = repository.versions(path)
    if not versions:
        raise FileNotFoundError(
            f"No servable model version under {path!r}: pass MODEL_BASE (holding "
            "<version>/saved_model.pb, as `genni export` writes) or MODEL_BASE/"
            "<version>."
        )
    version = max(versions)
    return os.path.join(path, versions[version]), version


def check_model(path: str, k: int) -> int:
    """Load the SavedModel at `path` once, here, to fail before the pipeline
    starts: it must be a GenNi export (signatures `serving_default` and `top_k`
    with their inputs) and `k` at most its item count. Returns the item count."""
    try:
        model = tf.saved_model.load(path)
    except Exception as e:  # A truncated or foreign directory: say which.
        raise ValueError(
            f"Cannot load the SavedModel at {path!r} ({type(e).__name__}: "
            f"{str(e)[:300]}); pass MODEL_BASE/<version> to use another version."
        ) from None
    try:
        num_items = repository.check_genni_export(model)
    except ValueError as e:
        raise ValueError(f"{path}: {e} (signature mismatch).") from None
    if not 1 <= k <= num_items:
        raise ValueError(f"--k must be between 1 and {num_items}; got {k}.")
    return num_items


class TopKModel:
    """A loaded export: its `top_k` signature and its vocabulary."""

    def __init__(self, path: str):
        model = tf.saved_model.load(path)
        self.top_k = model.signatures[export.SIGNATURE_TOP_K]
        self.items = frozenset(
            b.decode("utf-8") for b in model.item_strings.numpy()[1:].tolist()
        )
        self._model = model  # Keeps the signature's resources alive.


class TopKModelHandler(inference.ModelHandler[list, dict, TopKModel]):
    """RunInference's handler for the `top_k` signature of a GenNi export.

    An example is one user's history (raw item ids, oldest first); a prediction
    is {"items": [...], "scores": [...], "known": bool}.
    """

    def __init__(self, path: str, k: int, batch_size: int = DEFAULT_BATCH_SIZE):
        super().__init__(min_batch_size=min(32, batch_size), max_batch_size=batch_size)
        self._path = path
        self._k = k

    def load_model(self) -> TopKModel:
        return TopKModel(self._path)

    def run_inference(
        self,
        batch: Sequence[list],
        model: TopKModel,
        inference_args: dict | None = None,
    ) -> Iterable[inference.PredictionResult]:
        width = max(1, max(len(history) for history in batch))
        padded = np.array(
            [list(h) + [""] * (width - len(h)) for h in batch], dtype=object
        )
        out = model.top_k(
            history=tf.constant(padded, dtype=tf.string),
            k=tf.constant(self._k, dtype=tf.int32),
        )
        ids = out[export.ITEM_IDS].numpy()
        scores = out[export.SCORES].numpy()
        counts = out[export.NUM_RESULTS].numpy()
        for row, history in enumerate(batch):
            n = int(counts[row])
            yield inference.PredictionResult(
                history,
                {
                    "items": [i.decode("utf-8") for i in ids[row, :n].tolist()],
                    "scores": scores[row, :n].tolist(),
                    "known": any(item in model.items for item in history),
                },
            )

    def get_num_bytes(self, batch: Sequence[list]) -> int:
        # The default pickles every batch only to measure it.
        return sum(len(item) for history in batch for item in history)

    def get_metrics_namespace(self) -> str:
        return "genni.batch_recommend"


class FormatRecommendationsFn(beam.DoFn):
    """(user, PredictionResult) -> one JSON line; counts users, reports progress.

    The progress line goes to stderr every PROGRESS_SECONDS, per worker.
    """

    def setup(self) -> None:
        self._done = 0
        self._start = self._last = time.monotonic()

    def start_bundle(self) -> None:
        self._counts: collections.Counter = collections.Counter()

    def process(self, element: tuple[str, inference.PredictionResult]) -> Iterator:
        user, result = element
        answer = result.inference
        record = {"user": user, "items": answer["items"], "scores": answer["scores"]}
        self._counts[USERS_WRITTEN] += 1
        if not answer["known"]:
            record["popular_fallback"] = True
            self._counts[POPULAR_FALLBACK] += 1
        self._done += 1
        now = time.monotonic()
        if now - self._last >= PROGRESS_SECONDS:
            self._last = now
            rate = self._done / (now - self._start)
            print(
                f"  ... {self._done:,} users recommended ({rate:,.0f} users/s)",
                file=sys.stderr,
                flush=True,
            )
        yield json.dumps(record)

    def finish_bundle(self) -> Iterator:
        for key, value in self._counts.items():
            yield preprocess._stat(key, value)


def _write_summary(pairs: list[tuple[str, int]], settings: dict, path: str) -> None:
    counts: collections.Counter = collections.Counter()
    for key, value in pairs:
        counts[key] += value
    summary = dict(settings)
    for key in (USERS_WRITTEN, POPULAR_FALLBACK, *sequences.COUNTERS):
        summary[key] = counts[key]
    outputs.write_json(path, summary)


def build_pipeline(
    p: beam.Pipeline, config: BatchConfig, fmt: str, model_path: str, staging: str
) -> None:
    """Add the whole batch-recommendation graph, writing into `staging`, to `p`."""
    join = FileSystems.join
    parsed = (
        p
        | "ReadLogs" >> preprocess.ReadLogs(config.input)
        | "ParseReviews"
        >> preprocess.ParseReviews(
            fmt, config.min_rating, inmemory.log_header(config.input, fmt)
        )
    )
    users = preprocess.ordered_per_user(
        parsed[preprocess.EVENTS], preprocess.OrderUserEventsFn()
    )
    handler = inference.KeyedModelHandler(
        TopKModelHandler(model_path, config.k, config.batch_size)
    )
    lines = (
        users.users
        | "RunInference" >> inference.RunInference(handler)
        | "Format"
        >> beam.ParDo(FormatRecommendationsFn()).with_outputs(
            preprocess.STATS, main="lines"
        )
    )
    _ = lines.lines | "WriteRecommendations" >> beam.io.WriteToText(
        join(staging, RECOMMENDATIONS_PREFIX),
        file_name_suffix=".jsonl",
        num_shards=config.num_shards,
    )
    _ = parsed[preprocess.DEAD_LETTER] | "WriteDeadLetter" >> beam.io.WriteToText(
        join(staging, schema.DEAD_LETTER_DIR, schema.DEAD_LETTER_PREFIX),
        file_name_suffix=".jsonl",
    )
    settings = {
        "model": model_path,
        "input": config.input,
        "format": fmt,
        "k": config.k,
        "min_rating": config.min_rating,
    }
    _ = (
        (parsed[preprocess.STATS], users[preprocess.STATS], lines[preprocess.STATS])
        | "FlattenStats" >> beam.Flatten()
        | "AllStats" >> beam.combiners.ToList()
        | "WriteSummary"
        >> beam.Map(_write_summary, settings=settings, path=join(staging, SUMMARY_FILE))
    )


def _check_input(config: BatchConfig) -> str:
    """Fail early on a missing or empty input; returns the log format."""
    outputs.input_files(config.input)
    lines = (line for _, line in outputs.iter_lines(config.input))
    if not any(line.strip() for line in lines):
        raise ValueError(f"The input {config.input!r} is empty: no record to read.")
    return inmemory.log_format(config.input, config.format, config.min_rating)


def run(config: BatchConfig, pipeline_args: list[str] | None = None) -> dict:
    """Recommend for every user of `config.input`; returns the summary.

    Raises:
        FileNotFoundError: no input file, or no model version.
        OutputExistsError: the output is not empty and `overwrite` is off.
        ValueError: an empty input, an unknown format, a model that is not a
            GenNi export, a bad k, or no user with a valid record (the output,
            with its dead letters and summary but no `_SUCCESS`, is kept).
    """
    if config.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1; got {config.batch_size}.")
    fmt = _check_input(config)
    outputs.check_output(config.output, config.overwrite)
    model_path, version = resolve_model(config.model)
    check_model(model_path, config.k)
    staging = outputs.staging_dir(config.output)
    start = time.perf_counter()
    with outputs.job_staging(staging, config.output):
        with beam.Pipeline(options=pipeline_options(pipeline_args)) as p:
            build_pipeline(p, config, fmt, model_path, staging)
        summary_path = FileSystems.join(staging, SUMMARY_FILE)
        summary = outputs.read_json(summary_path)
        seconds = time.perf_counter() - start
        summary.update(
            version=version,
            batch_size=config.batch_size,
            seconds=round(seconds, 3),
            users_per_second=round(summary[USERS_WRITTEN] / seconds, 1),
        )
        outputs.write_json(summary_path, summary)
        if summary[USERS_WRITTEN]:
            outputs.write_text(FileSystems.join(staging, SUCCESS_FILE), [])
        outputs.commit(staging, config.output)
    if not summary[USERS_WRITTEN]:
        raise ValueError(
            f"No user in {config.input!r} has a valid record "
            f"({summary['malformed_lines']:,} malformed lines, set aside in "
            f"{FileSystems.join(config.output, schema.DEAD_LETTER_DIR)}/)."
        )
    return summary


def read_recommendations(output: str) -> dict[str, dict]:
    """User -> its record, from every recommendations shard under `output`."""
    pattern = FileSystems.join(output, f"{RECOMMENDATIONS_PREFIX}-*.jsonl")
    found = {}
    for _, line in outputs.iter_lines(pattern):
        record = json.loads(line)
        found[record["user"]] = record
    return found

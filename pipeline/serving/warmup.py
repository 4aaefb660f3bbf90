"""Warm-up requests stored with an export, replayed before a version serves.

`write(export_dir, items)` puts TF Serving's warm-up file,
`assets.extra/tf_serving_warmup_requests`, in a SavedModel: a TFRecord of
`tensorflow.serving.PredictionLog` protos, each holding one `PredictRequest`
(`serving_default` and `top_k` on a short history of the model's own items, at
batch sizes 1 and 4). Stock TF Serving replays them when it loads the version,
and so does `genni serve` (`read`), so the first real requests do not pay for
the graph's first run.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000  # TF Serving's own limit on warm-up records.
BATCH_SIZES = (1, 4)
HISTORY_LENGTH = 3


def histories(items: list[str], batch_size: int) -> np.ndarray:
    """A [batch_size, HISTORY_LENGTH] object array of item ids from `items`."""
    items = list(items)[:HISTORY_LENGTH] or [""]
    row = items + [""] * (HISTORY_LENGTH - len(items))
    return np.array([row] * batch_size, dtype=object)


def requests(items: list[str], k: int = 3) -> list[predict_pb2.PredictRequest]:
    """`serving_default` and `top_k` requests at each of BATCH_SIZES."""
    k = max(1, min(k, len(items)))
    out = []
    for batch_size in BATCH_SIZES:
        history = tf.make_tensor_proto(histories(items, batch_size), dtype=tf.string)
        for signature, extra in (("serving_default", {}), ("top_k", {"k": k})):
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = signature
            request.inputs["history"].CopyFrom(history)
            for name, value in extra.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(np.int32(value)))
            out.append(request)
    return out


def write(export_dir: str, items: list[str]) -> str:
    """Write the warm-up file into `export_dir`; returns its path."""
    path = os.path.join(export_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests(items):
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read(export_dir: str) -> list[predict_pb2.PredictRequest]:
    """The PredictRequests of `export_dir`'s warm-up file ([] if it has none).

    Raises ValueError if the file holds more than MAX_RECORDS records or a
    record that is not a PredictionLog with a predict request.
    """
    path = os.path.join(export_dir, WARMUP_FILE)
    if not tf.io.gfile.exists(path):
        return []
    out = []
    for i, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        if i >= MAX_RECORDS:
            raise ValueError(f"{path} holds more than {MAX_RECORDS} records.")
        log = prediction_log_pb2.PredictionLog.FromString(record)
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"Record {i} of {path} is not a predict log.")
        out.append(log.predict_log.request)
    return out

"""Predict requests: input validation, signature calls and JSON conversion.

Shared by both transports of `genni.pipeline.serving.server`: REST bodies
(`predict_json`, TF Serving's row and columnar formats) and gRPC TensorProtos
(`history_from_proto`, `k_from_proto`) are checked against the request limits
here before any tensor is built, then `run_signature` calls the SavedModel.
A client error is a `RequestError`, which each transport maps to its status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

from genni.pipeline.serving import export

if TYPE_CHECKING:
    from genni.pipeline.serving.repository import Servable

MAX_REQUEST_BYTES = 1 << 20  # A REST body or a gRPC message.
MAX_BATCH = 1024
MAX_HISTORY = 1000


class RequestError(ValueError):
    """A client error: maps to HTTP 400 (or `status`) and gRPC INVALID_ARGUMENT.

    `close`: the connection cannot carry another request (its framing is lost).
    """

    def __init__(self, message: str, status: int = 400, close: bool = False):
        super().__init__(message)
        self.status = status
        self.close = close


def get_signature(model: tf.Module, name: str) -> Callable:
    """The signature `name` ("" is `serving_default`); RequestError if none."""
    name = name or "serving_default"
    if name not in model.signatures:
        raise RequestError(
            f"Serving signature name: {name!r} not found in signature def; "
            f"available: {sorted(model.signatures)}"
        )
    return model.signatures[name]


def _history_array(value: object) -> np.ndarray:
    """A [B, L] string array from a list of histories (ragged allowed)."""
    if not isinstance(value, list) or not value:
        raise RequestError("`history` must be a non-empty list of lists of item ids.")
    if len(value) > MAX_BATCH:
        raise RequestError(f"At most {MAX_BATCH} histories per request.", 413)
    rows = []
    for row in value:
        if not isinstance(row, list) or not all(isinstance(i, str) for i in row):
            raise RequestError(
                "Each history must be a list of item-id strings; got "
                f"{json.dumps(row)[:80]}."
            )
        if len(row) > MAX_HISTORY:
            raise RequestError(f"A history may hold at most {MAX_HISTORY} items.", 413)
        rows.append(row)
    width = max(1, max(len(r) for r in rows))
    return np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)


def _k_value(value: object, num_items: int) -> np.int32:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"`k` must be an integer; got {json.dumps(value)}.")
    if not 1 <= value <= num_items:
        raise RequestError(f"`k` must be between 1 and {num_items}; got {value}.")
    return np.int32(value)


def history_from_proto(proto) -> np.ndarray:
    """`history` from a TensorProto, checked before any array is built.

    It must be DT_STRING, 2-D [batch, items] and hold exactly batch * items
    `string_val`s (TF broadcasts a single value only for numeric tensors), else
    INVALID_ARGUMENT; then batch <= MAX_BATCH and items <= MAX_HISTORY, else
    RESOURCE_EXHAUSTED (413), as for REST.
    """
    if proto.dtype != types_pb2.DT_STRING:
        raise RequestError("`history` must be a DT_STRING tensor.")
    shape = proto.tensor_shape
    if shape.unknown_rank or len(shape.dim) != 2:
        rank = "unknown rank" if shape.unknown_rank else f"{len(shape.dim)}-D"
        raise RequestError(f"`history` must be 2-D [batch, items]; got {rank}.")
    batch, width = shape.dim[0].size, shape.dim[1].size
    if batch < 1 or width < 0:
        raise RequestError(f"`history` has an invalid shape [{batch}, {width}].")
    if proto.tensor_content or len(proto.string_val) != batch * width:
        raise RequestError(
            f"`history` declares shape [{batch}, {width}] ({batch * width} values) "
            f"but holds {len(proto.string_val)} string_val values."
        )
    if batch > MAX_BATCH:
        raise RequestError(f"At most {MAX_BATCH} histories per request.", 413)
    if width > MAX_HISTORY:
        raise RequestError(f"A history may hold at most {MAX_HISTORY} items.", 413)
    if width == 0:
        return np.full((batch, 1), b"", dtype=object)
    return np.array(list(proto.string_val), dtype=object).reshape(batch, width)


_K_FIELDS = {
    types_pb2.DT_INT32: ("int_val", "<i4"),
    types_pb2.DT_INT64: ("int64_val", "<i8"),
}


def k_from_proto(proto, num_items: int) -> np.int32:
    """`k` from a TensorProto: an int32 (or int64) scalar with exactly one value."""
    if (
        proto.dtype not in _K_FIELDS
        or proto.tensor_shape.unknown_rank
        or len(proto.tensor_shape.dim)
    ):
        raise RequestError("`k` must be an integer scalar (DT_INT32, shape []).")
    field, fmt = _K_FIELDS[proto.dtype]
    values = getattr(proto, field)
    if proto.tensor_content:
        if values or len(proto.tensor_content) != np.dtype(fmt).itemsize:
            raise RequestError("`k` must hold exactly one value.")
        value = int(np.frombuffer(proto.tensor_content, fmt)[0])
    elif len(values) == 1:
        value = int(values[0])
    else:
        raise RequestError("`k` must hold exactly one value.")
    return _k_value(value, num_items)


def run_signature(
    model: tf.Module, signature: str, history: np.ndarray, k: np.int32 | None
) -> dict[str, np.ndarray]:
    """Call a signature on validated inputs; numpy outputs."""
    fn = get_signature(model, signature)
    inputs = {export.HISTORY: tf.constant(history, dtype=tf.string)}
    expected = set(fn.structured_input_signature[1])
    if export.K in expected:
        if k is None:
            raise RequestError(f"Signature {signature!r} needs input `k`.")
        inputs[export.K] = tf.constant(k)
    elif k is not None:
        fn = get_signature(model, export.SIGNATURE_TOP_K)
        inputs[export.K] = tf.constant(k)
    outputs = fn(**inputs)
    return {name: value.numpy() for name, value in outputs.items()}


def _jsonable(values: np.ndarray | np.generic) -> object:
    """Numpy outputs of any dtype and rank as JSON values (bytes as UTF-8)."""
    if isinstance(values, bytes):
        return values.decode("utf-8")
    if values.dtype == object or values.dtype.kind == "S":
        if values.ndim == 0:
            return _jsonable(values.item())
        return [_jsonable(row) for row in values]
    return values.tolist()


def predict_json(servable: Servable, body: dict) -> dict:
    """TF Serving's REST predict: row ("instances") or columnar ("inputs")."""
    model = servable.model
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    signature = body.get("signature_name", "serving_default")
    if not isinstance(signature, str):
        raise RequestError("`signature_name` must be a string.")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError('The request needs exactly one of "instances" or "inputs".')
    num_items = servable.num_items
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list) or not instances:
            raise RequestError('"instances" must be a non-empty list.')
        histories, ks = [], set()
        if len({isinstance(i, dict) and export.K in i for i in instances}) > 1:
            raise RequestError("Either every instance gives `k` or none does.")
        for instance in instances:
            if isinstance(instance, dict):
                unknown = set(instance) - {export.HISTORY, export.K}
                if unknown:
                    raise RequestError(f"Unknown inputs: {sorted(unknown)}.")
                if export.HISTORY not in instance:
                    raise RequestError("Each instance needs a `history`.")
                histories.append(instance[export.HISTORY])
                if export.K in instance:
                    ks.add(json.dumps(instance[export.K]))
            else:
                histories.append(instance)
        if len(ks) > 1:
            raise RequestError("All instances of a request must use the same `k`.")
        k = _k_value(json.loads(ks.pop()), num_items) if ks else None
        outputs = run_signature(model, signature, _history_array(histories), k)
        names = sorted(outputs)
        return {
            "predictions": [
                {name: _jsonable(outputs[name][i]) for name in names}
                for i in range(len(histories))
            ]
        }
    inputs = body["inputs"]
    if not isinstance(inputs, dict):
        raise RequestError('"inputs" must be an object of named inputs.')
    unknown = set(inputs) - {export.HISTORY, export.K}
    if unknown:
        raise RequestError(f"Unknown inputs: {sorted(unknown)}.")
    if export.HISTORY not in inputs:
        raise RequestError("Missing input `history`.")
    k = _k_value(inputs[export.K], num_items) if export.K in inputs else None
    outputs = run_signature(model, signature, _history_array(inputs[export.HISTORY]), k)
    return {"outputs": {name: _jsonable(value) for name, value in outputs.items()}}

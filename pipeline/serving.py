"""`genni serve`: a TF Serving-compatible endpoint (REST and gRPC) for any machine.

It speaks TF Serving's own API, so one client works against both this server
and the official `tensorflow/serving` image serving the same MODEL_BASE:

- REST: `POST /v1/models/{name}[/versions/{v}]:predict` with `{"instances":
  [...]}` (row format) or `{"inputs": {...}}` (columnar); `GET
  /v1/models/{name}[/versions/{v}]` (version status) and `GET
  /v1/models/{name}[/versions/{v}]/metadata`. Errors are `{"error": "..."}`
  with a 4xx status.
- gRPC: `tensorflow.serving.PredictionService/Predict` and
  `ModelService/GetModelStatus`, on tensorflow-serving-api's generated servicers.

The highest version under MODEL_BASE is served; a new version directory is
loaded in the background and swapped in atomically, so requests in flight
finish on the version they started with. Bad input never takes the server down.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from pipeline import export

_LOG = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "genni"
MAX_REQUEST_BYTES = 1 << 20
DISCARD_LIMIT_BYTES = 64 << 20
MAX_BATCH = 1024
MAX_HISTORY = 1000
POLL_SECONDS = 2.0
REST_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?"
    r"(?P<action>:predict|/metadata)?$"
)


class RequestError(ValueError):
    """A client error: maps to HTTP 400 (or `status`) and gRPC INVALID_ARGUMENT."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class ModelRepository:
    """Versions of one model under a base path; reloads when a new one appears."""

    def __init__(self, base_path: str, name: str):
        self.base_path = base_path
        self.name = name
        self._lock = threading.Lock()
        self._versions: dict[int, tf.Module] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        if not self.poll():
            raise FileNotFoundError(
                f"No model version under {base_path!r}: export one with "
                "`genni export` (MODEL_BASE/<version>/saved_model.pb)."
            )

    def available(self) -> list[int]:
        if not os.path.isdir(self.base_path):
            return []
        return sorted(
            int(v)
            for v in os.listdir(self.base_path)
            if v.isdigit()
            and os.path.exists(os.path.join(self.base_path, v, "saved_model.pb"))
        )

    def poll(self) -> bool:
        """Load the newest version if it is not loaded yet; True if any is served."""
        versions = self.available()
        if versions and versions[-1] not in self._versions:
            newest = versions[-1]
            try:
                model = tf.saved_model.load(os.path.join(self.base_path, str(newest)))
            except (OSError, ValueError, tf.errors.OpError) as e:
                _LOG.error("Cannot load version %s: %s", newest, e)
            else:
                with self._lock:  # Swap: new requests see the new version.
                    self._versions = {newest: model}
                _LOG.info("Serving %s version %s", self.name, newest)
        return bool(self._versions)

    def start_polling(self, seconds: float = POLL_SECONDS) -> None:
        def loop() -> None:
            while not self._stop.wait(seconds):
                self.poll()

        self._poller = threading.Thread(target=loop, daemon=True, name="poll")
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()

    def get(self, name: str, version: int | None) -> tuple[int, tf.Module]:
        if name != self.name:
            raise RequestError(f"Servable not found for request: {name!r}", 404)
        with self._lock:
            versions = dict(self._versions)
        if version is None:
            newest = max(versions)
            return newest, versions[newest]
        if version not in versions:
            raise RequestError(
                f"Servable not found for request: {name!r} version {version}", 404
            )
        return version, versions[version]


def _signature(model: tf.Module, name: str) -> Callable:
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


def run_signature(
    model: tf.Module, signature: str, history: np.ndarray, k: np.int32 | None
) -> dict[str, np.ndarray]:
    """Call a signature on validated inputs; numpy outputs."""
    fn = _signature(model, signature)
    inputs = {export.HISTORY: tf.constant(history, dtype=tf.string)}
    expected = set(fn.structured_input_signature[1])
    if export.K in expected:
        if k is None:
            raise RequestError(f"Signature {signature!r} needs input `k`.")
        inputs[export.K] = tf.constant(k)
    elif k is not None:
        fn = _signature(model, export.SIGNATURE_TOP_K)
        inputs[export.K] = tf.constant(k)
    outputs = fn(**inputs)
    return {name: value.numpy() for name, value in outputs.items()}


def _num_items(model: tf.Module) -> int:
    return int(model.item_strings.shape[0]) - 1


def _jsonable(values: np.ndarray) -> list:
    if values.dtype == object or values.dtype.kind == "S":
        if values.ndim == 1:
            return [v.decode("utf-8") for v in values]
        return [_jsonable(row) for row in values]
    return values.tolist()


def predict_json(model: tf.Module, body: dict) -> dict:
    """TF Serving's REST predict: row ("instances") or columnar ("inputs")."""
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    signature = body.get("signature_name", "serving_default")
    if not isinstance(signature, str):
        raise RequestError("`signature_name` must be a string.")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError('The request needs exactly one of "instances" or "inputs".')
    num_items = _num_items(model)
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


def version_status(repository: ModelRepository, name: str, version: int | None) -> dict:
    served, _ = repository.get(name, version)
    return {
        "model_version_status": [
            {
                "version": str(served),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }


def metadata(repository: ModelRepository, name: str, version: int | None) -> dict:
    served, model = repository.get(name, version)
    signatures = {}
    for key, fn in model.signatures.items():
        signatures[key] = {
            "inputs": {
                n: {"dtype": s.dtype.name, "shape": s.shape.as_list()}
                for n, s in fn.structured_input_signature[1].items()
            },
            "outputs": {
                n: {"dtype": s.dtype.name, "shape": s.shape.as_list()}
                for n, s in fn.structured_outputs.items()
            },
        }
    return {
        "model_spec": {"name": name, "signature_name": "", "version": str(served)},
        "metadata": {"signature_def": {"signature_def": signatures}},
    }


def make_rest_handler(repository: ModelRepository) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "genni-serving"
        # Headers and body leave in one segment, without Nagle's delay: else a
        # keep-alive client waits out a delayed ACK (about 40 ms) per request.
        disable_nagle_algorithm = True
        wbufsize = 1 << 16

        def log_message(self, fmt: str, *args: object) -> None:
            _LOG.debug("%s " + fmt, self.address_string(), *args)

        def _send(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def _route(self) -> tuple[str, int | None, str]:
            match = REST_PATH.match(self.path)
            if not match:
                raise RequestError(
                    f"Malformed request: {self.command} {self.path}", 404
                )
            version = match["version"]
            if version is not None and not version.isdigit():
                raise RequestError(f"Malformed version: {version!r}")
            return (
                match["name"],
                int(version) if version else None,
                match["action"] or "",
            )

        def _handle(self, work: Callable[[], dict]) -> None:
            try:
                self._send(200, work())
            except RequestError as e:
                self._send(e.status, {"error": str(e)})
            except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
                self._send(400, {"error": f"Invalid input: {e}"})
            except Exception as e:  # Never let one request take the server down.
                _LOG.exception("Internal error")
                self._send(500, {"error": f"Internal error: {type(e).__name__}"})

        def _discard(self, length: int) -> None:
            # Read what the client is still sending (up to a bound), so that it
            # gets the 413 answer instead of a reset connection.
            left = min(length, DISCARD_LIMIT_BYTES)
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

        def do_GET(self) -> None:
            def work() -> dict:
                name, version, action = self._route()
                if action == ":predict":
                    raise RequestError("Use POST for :predict.", 405)
                if action == "/metadata":
                    return metadata(repository, name, version)
                return version_status(repository, name, version)

            self._handle(work)

        def do_POST(self) -> None:
            def work() -> dict:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_REQUEST_BYTES:
                    self._discard(length)
                    self.close_connection = True
                    raise RequestError(
                        f"Request of {length} bytes exceeds {MAX_REQUEST_BYTES}.", 413
                    )
                raw = self.rfile.read(length)
                name, version, action = self._route()
                if action != ":predict":
                    raise RequestError(f"Unsupported POST action on {self.path}", 404)
                try:
                    body = json.loads(raw or b"null")
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise RequestError(f"Malformed JSON: {e}") from None
                _, model = repository.get(name, version)
                return predict_json(model, body)

            self._handle(work)

    return Handler


def _requested_version(model_spec) -> int | None:
    return model_spec.version.value if model_spec.HasField("version") else None


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, repository: ModelRepository):
        self.repository = repository

    def Predict(self, request, context):
        try:
            served, model = self.repository.get(
                request.model_spec.name, _requested_version(request.model_spec)
            )
            if export.HISTORY not in request.inputs:
                raise RequestError("Missing input `history`.")
            unknown = set(request.inputs) - {export.HISTORY, export.K}
            if unknown:
                raise RequestError(f"Unknown inputs: {sorted(unknown)}.")
            proto = request.inputs[export.HISTORY]
            if proto.dtype != tf.string.as_datatype_enum:
                raise RequestError("`history` must be a DT_STRING tensor.")
            history = tf.make_ndarray(proto)
            if history.ndim != 2:
                raise RequestError(
                    f"`history` must be 2-D [batch, items]; got {history.ndim}-D."
                )
            if history.shape[0] > MAX_BATCH or history.shape[1] > MAX_HISTORY:
                raise RequestError("Request too large.", 413)
            k = None
            if export.K in request.inputs:
                k_array = tf.make_ndarray(request.inputs[export.K])
                if k_array.shape != () or k_array.dtype.kind not in "iu":
                    raise RequestError("`k` must be an integer scalar.")
                k = _k_value(int(k_array), _num_items(model))
            outputs = run_signature(
                model, request.model_spec.signature_name, history, k
            )
        except RequestError as e:
            code = (
                grpc.StatusCode.NOT_FOUND
                if e.status == 404
                else (
                    grpc.StatusCode.RESOURCE_EXHAUSTED
                    if e.status == 413
                    else grpc.StatusCode.INVALID_ARGUMENT
                )
            )
            context.abort(code, str(e))
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid input: {e}")
        response = predict_pb2.PredictResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = served
        response.model_spec.signature_name = (
            request.model_spec.signature_name or "serving_default"
        )
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, repository: ModelRepository):
        self.repository = repository

    def GetModelStatus(self, request, context):
        version = _requested_version(request.model_spec)
        try:
            served, _ = self.repository.get(request.model_spec.name, version)
        except RequestError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        response = get_model_status_pb2.GetModelStatusResponse()
        status = response.model_version_status.add()
        status.version = served
        status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        return response


class Server:
    """REST and gRPC endpoints over one model repository."""

    def __init__(
        self,
        base_path: str,
        name: str = DEFAULT_MODEL_NAME,
        host: str = "127.0.0.1",
        rest_port: int = 8501,
        grpc_port: int = 8500,
        poll_seconds: float = POLL_SECONDS,
        workers: int = 16,
    ):
        self.repository = ModelRepository(base_path, name)
        self.poll_seconds = poll_seconds
        self.http = ThreadingHTTPServer(
            (host, rest_port), make_rest_handler(self.repository)
        )
        self.http.daemon_threads = True
        self.grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers),
            options=[("grpc.max_receive_message_length", MAX_REQUEST_BYTES)],
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionServicer(self.repository), self.grpc
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(
            ModelServicer(self.repository), self.grpc
        )
        self.grpc_port = self.grpc.add_insecure_port(f"{host}:{grpc_port}")
        self.rest_port = self.http.server_address[1]
        self.host = host

    def start(self) -> Server:
        self.repository.start_polling(self.poll_seconds)
        self.grpc.start()
        self._http_thread = threading.Thread(
            target=self.http.serve_forever, daemon=True, name="rest"
        )
        self._http_thread.start()
        return self

    def stop(self) -> None:
        self.repository.stop()
        self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(grace=1).wait()

    def wait(self) -> None:
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            self.stop()

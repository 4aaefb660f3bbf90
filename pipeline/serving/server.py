"""`genni serve`: a TF Serving-compatible endpoint (REST and gRPC) for any machine.

It speaks TF Serving's own API, so one client works against both this server
and the official `tensorflow/serving` image serving the same MODEL_BASE:

- REST: `POST /v1/models/{name}[/versions/{v}]:predict` with `{"instances":
  [...]}` (row format) or `{"inputs": {...}}` (columnar); `GET
  /v1/models/{name}[/versions/{v}]` (version status) and `GET
  /v1/models/{name}[/versions/{v}]/metadata`. Errors are `{"error": "..."}`
  with a 4xx status for client errors (503 when the server is full).
- gRPC: `tensorflow.serving.PredictionService/Predict` (with `output_filter`)
  and `/GetModelMetadata` (`signature_def`, a SignatureDefMap in an Any), and
  `ModelService/GetModelStatus`, on tensorflow-serving-api's generated servicers.
  Bad input answers INVALID_ARGUMENT (RESOURCE_EXHAUSTED when too large).

Versions: MODEL_BASE/<n>/ for ASCII-digit n. The newest version that loads is
served. A version is loaded, checked to be a GenNi export (signatures
`serving_default` and `top_k` with inputs `history` [and `k`], the
`item_strings` variable) and warmed up (each signature at batch sizes 1 and 4,
then the export's `assets.extra/tf_serving_warmup_requests`, see
`genni.pipeline.serving.warmup`) before it takes traffic; then it is swapped in
atomically, so requests in flight finish on the version they started with. A
version that fails any of this is refused, logged once (again only if its files
change), and the server keeps serving what it served; the poller never stops.

Hardening: ports in use are an error at start-up (gRPC without SO_REUSEPORT);
REST has a listen backlog of REST_BACKLOG, at most MAX_CONNECTIONS open
connections (more wait up to QUEUE_SECONDS for a slot, then get 503), and
closes connections idle for IDLE_TIMEOUT_SECONDS. Bodies are framed by one
valid Content-Length or by chunked Transfer-Encoding (both at once is refused:
request smuggling), at most MAX_REQUEST_BYTES; a framing error closes the
connection. gRPC tensors are checked against their declared shape and the
limits before any array is built. Bad input never takes the server down.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from genni.pipeline.serving import export, warmup

_LOG = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "genni"
MAX_REQUEST_BYTES = 1 << 20
DISCARD_LIMIT_BYTES = 64 << 20
MAX_BATCH = 1024
MAX_HISTORY = 1000
POLL_SECONDS = 2.0
REST_BACKLOG = 512  # Listen queue; Python's default of 5 resets bursts.
MAX_CONNECTIONS = 256  # Open REST connections, one thread each.
QUEUE_SECONDS = 10.0  # How long a connection beyond the limit waits for a slot.
IDLE_TIMEOUT_SECONDS = 30.0  # A connection silent this long is closed.
MAX_LINE_BYTES = 1024  # A chunk-size or trailer line.
MAX_TRAILERS = 64
REQUIRED_SIGNATURES = {
    "serving_default": {export.HISTORY},
    export.SIGNATURE_TOP_K: {export.HISTORY, export.K},
}
REST_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?"
    r"(?P<action>:predict|/metadata)?$"
)


class RequestError(ValueError):
    """A client error: maps to HTTP 400 (or `status`) and gRPC INVALID_ARGUMENT.

    `close`: the connection cannot carry another request (its framing is lost).
    """

    def __init__(self, message: str, status: int = 400, close: bool = False):
        super().__init__(message)
        self.status = status
        self.close = close


class PortInUseError(RuntimeError):
    """A REST or gRPC port cannot be bound: another process listens on it."""


def _is_version(name: str) -> bool:
    """ASCII digits only: `"²".isdigit()` is True but int() refuses it."""
    return name.isascii() and name.isdigit()


@dataclass(frozen=True)
class Servable:
    """One loaded, checked and warmed-up version."""

    version: int
    model: tf.Module
    num_items: int
    signature_defs: get_model_metadata_pb2.SignatureDefMap


def check_genni_export(model: tf.Module) -> int:
    """Raise ValueError unless `model` is a GenNi export; returns its item count.

    Needs the signatures of REQUIRED_SIGNATURES with exactly those inputs and a
    string `item_strings` vector ("" then the items).
    """
    for name, inputs in REQUIRED_SIGNATURES.items():
        if name not in model.signatures:
            raise ValueError(
                f"not a GenNi export: no signature {name!r} "
                f"(has {sorted(model.signatures)})"
            )
        got = set(model.signatures[name].structured_input_signature[1])
        if got != inputs:
            raise ValueError(
                f"not a GenNi export: signature {name!r} takes {sorted(got)}, "
                f"not {sorted(inputs)}"
            )
    items = getattr(model, "item_strings", None)
    if (
        not isinstance(items, (tf.Variable, tf.Tensor))
        or items.dtype != tf.string
        or items.shape.rank != 1
        or items.shape[0] < 2
    ):
        raise ValueError("not a GenNi export: no `item_strings` vector of items")
    return int(items.shape[0]) - 1


def _signature_defs(path: str) -> get_model_metadata_pb2.SignatureDefMap:
    """The SignatureDefs of the `serve` meta graph, as TF Serving reports them."""
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved = saved_model_pb2.SavedModel.FromString(f.read())
    graphs = [g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags]
    defs = get_model_metadata_pb2.SignatureDefMap()
    for key, value in (graphs or saved.meta_graphs)[0].signature_def.items():
        defs.signature_def[key].CopyFrom(value)
    return defs


def warm_up(model: tf.Module, path: str, num_items: int) -> None:
    """Run every signature once before the version takes traffic.

    Each signature that takes `history` (and `k`) runs on a short history of
    the model's own items at each of warmup.BATCH_SIZES, then the export's
    warm-up records (if any) are replayed. Raises if any call fails.
    """
    items = [b.decode("utf-8") for b in model.item_strings[1:4].numpy()]
    for name, fn in model.signatures.items():
        inputs = set(fn.structured_input_signature[1])
        if export.HISTORY not in inputs or inputs - {export.HISTORY, export.K}:
            continue
        for batch_size in warmup.BATCH_SIZES:
            history = warmup.histories(items, batch_size)
            k = np.int32(min(3, num_items)) if export.K in inputs else None
            run_signature(model, name, history, k)
    for request in warmup.read(path):
        fn = _signature(model, request.model_spec.signature_name)
        fn(**{n: tf.constant(tf.make_ndarray(p)) for n, p in request.inputs.items()})


def load_servable(path: str, version: int) -> Servable:
    """Load, check and warm up the SavedModel at `path`; raises if it is unfit."""
    model = tf.saved_model.load(path)
    num_items = check_genni_export(model)
    defs = _signature_defs(path)
    warm_up(model, path, num_items)
    return Servable(version, model, num_items, defs)


def _fingerprint(path: str) -> tuple:
    """Names, sizes and mtimes of the files under `path`: changes if they do."""
    found = []
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            found.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


class ModelRepository:
    """Versions of one model under a base path; serves the newest that loads.

    `refused` maps each version that was refused to why (the error). A refused
    version is retried only when its files change.
    """

    def __init__(self, base_path: str, name: str):
        self.base_path = base_path
        self.name = name
        self.refused: dict[int, str] = {}
        self._refused_files: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._served: Servable | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        if not self.poll():
            why = "".join(f"\n  version {v}: {e}" for v, e in self.refused.items())
            raise FileNotFoundError(
                f"No loadable model version under {base_path!r}: export one with "
                f"`genni export` (MODEL_BASE/<version>/saved_model.pb).{why}"
            )

    def available(self) -> dict[int, str]:
        """Version -> directory name, for ASCII-digit directories with a model."""
        if not os.path.isdir(self.base_path):
            return {}
        found = {}
        for v in sorted(os.listdir(self.base_path), reverse=True):
            if _is_version(v) and os.path.exists(
                os.path.join(self.base_path, v, "saved_model.pb")
            ):
                found[int(v)] = v  # "7" wins over "007".
        return found

    @property
    def served(self) -> Servable | None:
        return self._served

    def poll(self) -> bool:
        """Serve the newest version that loads, if newer than the one served.

        Tries the versions newer than the served one, newest first; a version
        that fails to load, check or warm up is refused (logged once) and the
        next older one is tried. Never raises for a bad version. True if any
        version is served.
        """
        current = self._served.version if self._served else 0
        try:
            versions = self.available()
        except OSError as e:
            _LOG.error("Cannot list %s: %s", self.base_path, e)
            return self._served is not None
        for version in sorted(versions, reverse=True):
            if version <= current:
                break
            path = os.path.join(self.base_path, versions[version])
            files = _fingerprint(path)
            if self._refused_files.get(version) == files:
                continue  # Refused already, and unchanged since.
            try:
                servable = load_servable(path, version)
            except Exception as e:  # Whatever is wrong with it, skip it.
                self.refused[version] = f"{type(e).__name__}: {str(e)[:500]}"
                self._refused_files[version] = files
                _LOG.error(
                    "Refused %s version %s (%s); %s",
                    self.name,
                    version,
                    self.refused[version],
                    f"still serving version {current}" if current else "skipped",
                )
                continue
            with self._lock:  # Swap: new requests see the new version.
                self._served = servable
            self.refused.pop(version, None)
            self._refused_files.pop(version, None)
            _LOG.info("Serving %s version %s", self.name, version)
            break
        return self._served is not None

    def start_polling(self, seconds: float = POLL_SECONDS) -> None:
        """Poll every `seconds` in a daemon thread, which no error stops."""

        def loop() -> None:
            while not self._stop.wait(seconds):
                try:
                    self.poll()
                except Exception:  # The poller must outlive any one poll.
                    _LOG.exception("Version poll failed; polling goes on")

        self._poller = threading.Thread(target=loop, daemon=True, name="poll")
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:  # Let a load in progress finish.
            self._poller.join(timeout=60)

    def get(self, name: str, version: int | None) -> Servable:
        """The served version (404 RequestError for another name or version)."""
        if name != self.name:
            raise RequestError(f"Servable not found for request: {name!r}", 404)
        with self._lock:
            served = self._served
        if version is not None and version != served.version:
            raise RequestError(
                f"Servable not found for request: {name!r} version {version}", 404
            )
        return served


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


def version_status(repository: ModelRepository, name: str, version: int | None) -> dict:
    served = repository.get(name, version)
    return {
        "model_version_status": [
            {
                "version": str(served.version),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }


def metadata(repository: ModelRepository, name: str, version: int | None) -> dict:
    served = repository.get(name, version)
    signatures = {}
    for key, fn in served.model.signatures.items():
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
        "model_spec": {
            "name": name,
            "signature_name": "",
            "version": str(served.version),
        },
        "metadata": {"signature_def": {"signature_def": signatures}},
    }


def _json_response(status: int, body: dict, close: bool = False) -> bytes:
    """A whole HTTP/1.1 response with a JSON body, for answers sent outside a
    handler (a connection refused for lack of a slot)."""
    payload = json.dumps(body).encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n"
        + ("Connection: close\r\nRetry-After: 1\r\n" if close else "")
        + "\r\n"
    )
    return head.encode("latin-1") + payload


class RestServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a real backlog and a bound on open connections.

    One thread per connection, at most `max_connections` at once; a connection
    beyond that waits up to `queue_seconds` for one to close (the accept loop
    waits, further ones queue in the kernel's backlog), then is answered 503.
    """

    daemon_threads = True
    request_queue_size = REST_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int = MAX_CONNECTIONS,
        queue_seconds: float = QUEUE_SECONDS,
    ):
        self.max_connections = max_connections
        self.queue_seconds = queue_seconds
        self.active = 0
        self._slots = threading.Condition()
        self._closing = threading.Event()
        super().__init__(address, handler)

    def _take_slot(self) -> bool:
        deadline = time.monotonic() + self.queue_seconds
        with self._slots:
            while self.active >= self.max_connections:
                left = deadline - time.monotonic()
                if left <= 0 or self._closing.is_set():
                    return False
                self._slots.wait(min(left, 0.25))
            self.active += 1
            return True

    def _free_slot(self) -> None:
        with self._slots:
            self.active -= 1
            self._slots.notify()

    def process_request(self, request: socket.socket, client_address) -> None:
        if not self._take_slot():
            try:
                request.settimeout(1.0)
                request.sendall(
                    _json_response(
                        503,
                        {"error": "Server busy: too many open connections."},
                        close=True,
                    )
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._free_slot()
            raise

    def process_request_thread(self, request: socket.socket, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._free_slot()

    def handle_error(self, request, client_address) -> None:
        # A client that resets or times out is routine: no traceback on stderr.
        _LOG.debug("Connection from %s failed", client_address, exc_info=True)

    def shutdown(self) -> None:
        self._closing.set()
        super().shutdown()


def make_rest_handler(
    repository: ModelRepository, idle_timeout: float = IDLE_TIMEOUT_SECONDS
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "genni-serving"
        # Headers and body leave in one segment, without Nagle's delay: else a
        # keep-alive client waits out a delayed ACK (about 40 ms) per request.
        disable_nagle_algorithm = True
        wbufsize = 1 << 16
        timeout = idle_timeout  # Per socket operation: idle keep-alive included.

        def log_message(self, fmt: str, *args: object) -> None:
            _LOG.debug("%s " + fmt, self.address_string(), *args)

        def _send(self, status: int, body: dict, close: bool = False) -> None:
            payload = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            self.wfile.flush()

        def send_error(
            self, code: int, message: str | None = None, explain: str | None = None
        ) -> None:
            """The base class's own errors (bad request line, unsupported
            method, headers too long, ...) as JSON; the connection closes."""
            self.log_error("code %d, message %s", code, message)
            try:
                self._send(code, {"error": message or HTTPStatus(code).phrase}, True)
            except OSError:
                self.close_connection = True

        def _route(self) -> tuple[str, int | None, str]:
            match = REST_PATH.match(self.path)
            if not match:
                raise RequestError(
                    f"Malformed request: {self.command} {self.path}", 404
                )
            version = match["version"]
            if version is not None and not _is_version(version):
                raise RequestError(f"Malformed version: {version!r}")
            return (
                match["name"],
                int(version) if version else None,
                match["action"] or "",
            )

        def _handle(self, work: Callable[[], dict]) -> None:
            """Answer `work()` as JSON: 200, 4xx for client errors, 500 else."""
            close = False
            try:
                status, body = 200, work()
            except RequestError as e:
                status, body, close = e.status, {"error": str(e)}, e.close
            except RecursionError:
                status, body = 400, {"error": "Invalid input: nested too deeply."}
            except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
                status, body = 400, {"error": f"Invalid input: {e}"}
            except ConnectionError:  # The client went away mid-request.
                self.close_connection = True
                return
            except Exception as e:  # Never let one request take the server down.
                _LOG.exception("Internal error")
                status, body = 500, {"error": f"Internal error: {type(e).__name__}"}
            try:
                self._send(status, body, close)
            except ConnectionError:
                self.close_connection = True

        def _discard(self, length: int) -> None:
            # Read what the client is still sending (up to a bound), so that it
            # gets the 413 answer instead of a reset connection.
            left = min(length, DISCARD_LIMIT_BYTES)
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)

        def _read_body(self) -> bytes:
            """The body, framed by one Content-Length or chunked encoding.

            RequestError (connection to close) for both framings at once (a
            smuggled request could follow), an invalid Content-Length, another
            transfer coding, a malformed chunk, a body over MAX_REQUEST_BYTES
            (413), or a client that stops sending (408).
            """
            encodings = self.headers.get_all("Transfer-Encoding") or []
            lengths = self.headers.get_all("Content-Length") or []
            try:
                if encodings and lengths:
                    raise RequestError(
                        "A request may not have both Content-Length and "
                        "Transfer-Encoding.",
                        close=True,
                    )
                if encodings:
                    codings = [
                        c.strip().lower() for e in encodings for c in e.split(",")
                    ]
                    if codings != ["chunked"]:
                        raise RequestError(
                            f"Unsupported Transfer-Encoding: {', '.join(encodings)}.",
                            501,
                            close=True,
                        )
                    return self._read_chunked()
                if not lengths:
                    return b""
                values = {v.strip() for v in lengths}
                value = values.pop()
                if values or not re.fullmatch(r"[0-9]{1,18}", value):
                    raise RequestError(
                        f"Invalid Content-Length: {', '.join(lengths)[:40]!r}.",
                        close=True,
                    )
                length = int(value)
                if length > MAX_REQUEST_BYTES:
                    self._discard(length)
                    raise RequestError(
                        f"Request of {length} bytes exceeds {MAX_REQUEST_BYTES}.",
                        413,
                        close=True,
                    )
                raw = self.rfile.read(length)
                if len(raw) < length:
                    raise RequestError("The body ended early.", close=True)
                return raw
            except TimeoutError:
                raise RequestError(
                    "Timed out reading the request body.", 408, close=True
                ) from None

        def _read_chunked(self) -> bytes:
            body, size_total = bytearray(), 0
            while True:
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
                size_text = line.split(b";", 1)[0].strip()
                if not line.endswith(b"\n") or not re.fullmatch(
                    rb"[0-9A-Fa-f]{1,8}", size_text
                ):
                    raise RequestError("Malformed chunked body.", close=True)
                size = int(size_text, 16)
                if size == 0:
                    break
                size_total += size
                if size_total > DISCARD_LIMIT_BYTES:
                    break  # Answer 413 without reading on.
                chunk = self.rfile.read(size)
                if len(chunk) < size or self.rfile.readline(3).strip():
                    raise RequestError("Malformed chunked body.", close=True)
                if size_total <= MAX_REQUEST_BYTES:
                    body += chunk
            if size_total > MAX_REQUEST_BYTES:
                raise RequestError(
                    f"Request of more than {MAX_REQUEST_BYTES} bytes.", 413, close=True
                )
            for _ in range(MAX_TRAILERS):  # Trailer fields, then an empty line.
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
                if not line.endswith(b"\n"):
                    break
                if not line.strip():
                    return bytes(body)
            raise RequestError("Malformed chunked body trailer.", close=True)

        def do_GET(self) -> None:
            def work() -> dict:
                self._read_body()  # Ignored, but read: the next request follows it.
                name, version, action = self._route()
                if action == ":predict":
                    raise RequestError("Use POST for :predict.", 405)
                if action == "/metadata":
                    return metadata(repository, name, version)
                return version_status(repository, name, version)

            self._handle(work)

        def do_POST(self) -> None:
            def work() -> dict:
                raw = self._read_body()
                name, version, action = self._route()
                if action != ":predict":
                    raise RequestError(f"Unsupported POST action on {self.path}", 404)
                try:
                    body = json.loads(raw or b"null")
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise RequestError(f"Malformed JSON: {e}") from None
                except RecursionError:
                    raise RequestError("Malformed JSON: nested too deeply.") from None
                return predict_json(repository.get(name, version), body)

            self._handle(work)

    return Handler


def _requested_version(model_spec) -> int | None:
    return model_spec.version.value if model_spec.HasField("version") else None


def _abort(context, e: RequestError) -> None:
    code = {
        404: grpc.StatusCode.NOT_FOUND,
        413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    }.get(e.status, grpc.StatusCode.INVALID_ARGUMENT)
    context.abort(code, str(e))


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict (with TF Serving's `output_filter`) and GetModelMetadata."""

    def __init__(self, repository: ModelRepository):
        self.repository = repository

    def Predict(self, request, context):
        try:
            served = self.repository.get(
                request.model_spec.name, _requested_version(request.model_spec)
            )
            if export.HISTORY not in request.inputs:
                raise RequestError("Missing input `history`.")
            unknown = set(request.inputs) - {export.HISTORY, export.K}
            if unknown:
                raise RequestError(f"Unknown inputs: {sorted(unknown)}.")
            history = history_from_proto(request.inputs[export.HISTORY])
            k = None
            if export.K in request.inputs:
                k = k_from_proto(request.inputs[export.K], served.num_items)
            outputs = run_signature(
                served.model, request.model_spec.signature_name, history, k
            )
            if request.output_filter:
                missing = set(request.output_filter) - set(outputs)
                if missing:
                    raise RequestError(
                        f"output tensor alias not found in signature: "
                        f"{sorted(missing)}; outputs: {sorted(outputs)}"
                    )
                outputs = {
                    n: v for n, v in outputs.items() if n in request.output_filter
                }
        except RequestError as e:
            _abort(context, e)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid input: {e}")
        response = predict_pb2.PredictResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = served.version
        response.model_spec.signature_name = (
            request.model_spec.signature_name or "serving_default"
        )
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
        return response

    def GetModelMetadata(self, request, context):
        """`signature_def` metadata: a SignatureDefMap packed in an Any."""
        try:
            served = self.repository.get(
                request.model_spec.name, _requested_version(request.model_spec)
            )
            if not request.metadata_field:
                raise RequestError(
                    "GetModelMetadataRequest must specify at least one metadata_field"
                )
            for field in request.metadata_field:
                if field != "signature_def":
                    raise RequestError(f"Metadata field {field} is not supported")
        except RequestError as e:
            _abort(context, e)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = request.model_spec.name
        response.model_spec.version.value = served.version
        response.metadata["signature_def"].Pack(served.signature_defs)
        return response


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, repository: ModelRepository):
        self.repository = repository

    def GetModelStatus(self, request, context):
        version = _requested_version(request.model_spec)
        try:
            served = self.repository.get(request.model_spec.name, version)
        except RequestError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        response = get_model_status_pb2.GetModelStatusResponse()
        status = response.model_version_status.add()
        status.version = served.version
        status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        return response


class Server:
    """REST and gRPC endpoints over one model repository.

    Both ports are bound first (PortInUseError if one is taken), then the
    newest loadable version is loaded (FileNotFoundError if none is); versions
    skipped at start-up are in `repository.refused`.
    """

    def __init__(
        self,
        base_path: str,
        name: str = DEFAULT_MODEL_NAME,
        host: str = "127.0.0.1",
        rest_port: int = 8501,
        grpc_port: int = 8500,
        poll_seconds: float = POLL_SECONDS,
        workers: int = 16,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
    ):
        self.host = host
        self.poll_seconds = poll_seconds
        self.repository: ModelRepository | None = None
        try:  # The handler class is set once the repository is loaded.
            self.http = RestServer(
                (host, rest_port), BaseHTTPRequestHandler, max_connections
            )
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"REST port {rest_port} on {host} is already in use: stop the "
                    "other server or pass another --rest-port."
                ) from e
            raise
        self.grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers),
            options=[
                ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
                ("grpc.so_reuseport", 0),  # Else a second server binds the port.
            ],
        )
        try:
            try:
                self.grpc_port = self.grpc.add_insecure_port(f"{host}:{grpc_port}")
                if not self.grpc_port:  # Older grpc answers 0 instead of raising.
                    raise RuntimeError(f"cannot bind {host}:{grpc_port}")
            except RuntimeError as e:
                raise PortInUseError(
                    f"gRPC port {grpc_port} on {host} is already in use (or cannot "
                    "be bound): stop the other server or pass another --grpc-port."
                ) from e
            self.repository = ModelRepository(base_path, name)
        except BaseException:
            self.http.server_close()
            self.grpc.stop(None)
            raise
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionServicer(self.repository), self.grpc
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(
            ModelServicer(self.repository), self.grpc
        )
        self.http.RequestHandlerClass = make_rest_handler(self.repository, idle_timeout)
        self.rest_port = self.http.server_address[1]

    _http_thread: threading.Thread | None = None

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
        if self._http_thread is not None:  # shutdown() waits for serve_forever.
            self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(grace=1).wait()

    def wait(self) -> None:
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            self.stop()

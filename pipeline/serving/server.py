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

Modules: `predict` (request limits, input validation, signature calls, JSON
conversion), `repository` (loading, checking, warm-up, version polling and the
hot swap), `rest` (the HTTP server and handler), `grpc_servicers` (the gRPC
services); this one binds the ports and assembles them (`Server`), and its
namespace still offers the public names of all of them. They all log to the
logger `genni.pipeline.serving.server`.
"""

from __future__ import annotations

import errno
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler

import grpc
from tensorflow_serving.apis import (
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from genni.pipeline.serving.grpc_servicers import ModelServicer, PredictionServicer
from genni.pipeline.serving.predict import (
    MAX_BATCH,
    MAX_HISTORY,
    MAX_REQUEST_BYTES,
    RequestError,
    get_signature,
    history_from_proto,
    k_from_proto,
    predict_json,
    run_signature,
)
from genni.pipeline.serving.repository import (
    POLL_SECONDS,
    REQUIRED_SIGNATURES,
    ModelRepository,
    Servable,
    check_genni_export,
    is_version,
    load_servable,
    warm_up,
)
from genni.pipeline.serving.rest import (
    DISCARD_LIMIT_BYTES,
    IDLE_TIMEOUT_SECONDS,
    MAX_CONNECTIONS,
    MAX_LINE_BYTES,
    MAX_TRAILERS,
    QUEUE_SECONDS,
    REST_BACKLOG,
    REST_PATH,
    RestServer,
    make_rest_handler,
    metadata,
    version_status,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DISCARD_LIMIT_BYTES",
    "IDLE_TIMEOUT_SECONDS",
    "MAX_BATCH",
    "MAX_CONNECTIONS",
    "MAX_HISTORY",
    "MAX_LINE_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_TRAILERS",
    "POLL_SECONDS",
    "QUEUE_SECONDS",
    "REQUIRED_SIGNATURES",
    "REST_BACKLOG",
    "REST_PATH",
    "ModelRepository",
    "ModelServicer",
    "PortInUseError",
    "PredictionServicer",
    "RequestError",
    "RestServer",
    "Servable",
    "Server",
    "check_genni_export",
    "get_signature",
    "history_from_proto",
    "is_version",
    "k_from_proto",
    "load_servable",
    "make_rest_handler",
    "metadata",
    "predict_json",
    "run_signature",
    "version_status",
    "warm_up",
]

DEFAULT_MODEL_NAME = "genni"


class PortInUseError(RuntimeError):
    """A REST or gRPC port cannot be bound: another process listens on it."""


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
        ann: bool = False,
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
            self.repository = ModelRepository(base_path, name, ann)
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

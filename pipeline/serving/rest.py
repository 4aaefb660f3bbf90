"""The REST endpoint: TF Serving's HTTP API on a hardened ThreadingHTTPServer.

`POST /v1/models/{name}[/versions/{v}]:predict`, `GET /v1/models/{name}
[/versions/{v}]` (version status) and `GET .../metadata`; errors are JSON
`{"error": "..."}` with a 4xx status for client errors (503 when full).
`RestServer` bounds open connections (MAX_CONNECTIONS, waiting QUEUE_SECONDS
for a slot) over a REST_BACKLOG listen queue; `make_rest_handler` frames bodies
by one Content-Length or chunked encoding (never both), at most
MAX_REQUEST_BYTES, and closes connections idle for IDLE_TIMEOUT_SECONDS.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tensorflow as tf

from genni.pipeline.serving.predict import (
    MAX_REQUEST_BYTES,
    RequestError,
    predict_json,
)
from genni.pipeline.serving.repository import ModelRepository, is_version

# One logger for the whole server (`genni serve --verbose` prints its name).
_LOG = logging.getLogger("genni.pipeline.serving.server")

DISCARD_LIMIT_BYTES = 64 << 20
REST_BACKLOG = 512  # Listen queue; Python's default of 5 resets bursts.
MAX_CONNECTIONS = 256  # Open REST connections, one thread each.
QUEUE_SECONDS = 10.0  # How long a connection beyond the limit waits for a slot.
IDLE_TIMEOUT_SECONDS = 30.0  # A connection silent this long is closed.
MAX_LINE_BYTES = 1024  # A chunk-size or trailer line.
MAX_TRAILERS = 64
REST_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?"
    r"(?P<action>:predict|/metadata)?$"
)


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
            if version is not None and not is_version(version):
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

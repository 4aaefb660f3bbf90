"""`genni serve` in a child process, and a client that keeps asking it.

`genni replay --serve` runs this over the loop's models directory: while the
pipeline publishes version after version, requests alternate between REST
(`:predict`) and gRPC (`PredictionService/Predict`), each a real history with
raw ids, and every answer is checked (an HTTP or gRPC error, a timeout or an
answer without items is a failure). The counts, the versions that answered
and the first errors are in `counts()`.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import time

from genni.pipeline.serving import client

_READY = re.compile(r"REST (http://\S+)/v1/models/\S+, gRPC (\S+?)[,.]? ")


def serve_command(
    base_path: str, rest_port: int, grpc_port: int, *options: str
) -> list[str]:
    """The command line of `genni serve` over `base_path` in a child process
    (port 0: a free one), with `options` before its ports."""
    return [
        sys.executable,
        "-m",
        "genni.pipeline.cli.main",
        "serve",
        "--model-base-path",
        base_path,
        *options,
        "--rest-port",
        str(rest_port),
        "--grpc-port",
        str(grpc_port),
    ]


def wait_until(condition, seconds: float, poll: float = 0.05) -> bool:
    """Whether `condition()` held within `seconds`, asked every `poll` seconds
    (a server's swap, refusal or connection count catching up)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll)
    return False


class ServeProbe:
    """Start with `start()`, give histories with `ask(histories)`, read
    `counts()`, end with `stop()` (the server's stderr is kept in `log_path`)."""

    def __init__(
        self,
        base_path: str,
        log_path: str,
        model: str = "genni",
        pause: float = 0.2,
        timeout: float = 30.0,
    ):
        self.base_path = base_path
        self.log_path = log_path
        self.model = model
        self.pause = pause
        self.timeout = timeout
        self.requests = {"rest": 0, "grpc": 0}
        self.failures = {"rest": 0, "grpc": 0}
        self.errors: list[str] = []
        self.versions: list[int] = []  # Each version the first time it answered.
        self._histories: list[list[str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def start(self) -> ServeProbe:
        command = serve_command(self.base_path, 0, 0, "--model-name", self.model)
        env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"}
        with open(self.log_path, "w") as err:
            self._process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=err, text=True, env=env
            )
        line = self._process.stdout.readline()  # Blocks until it serves or dies.
        match = _READY.search(line)
        if not match:
            self.stop()
            with open(self.log_path) as err:
                tail = err.read()[-2000:]
            raise RuntimeError(f"`genni serve` did not start: {line!r}\n{tail}")
        self.url, self.target = match.group(1), match.group(2)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="probe")
        self._thread.start()
        return self

    def ask(self, histories: list[list[str]]) -> None:
        """The histories to ask with from now on (raw ids, non-empty)."""
        self._histories = [list(h) for h in histories if h]

    def counts(self) -> dict:
        with self._lock:
            return {
                "requests": sum(self.requests.values()),
                "failures": sum(self.failures.values()),
                "by_api": {
                    kind: {"requests": n, "failures": self.failures[kind]}
                    for kind, n in self.requests.items()
                },
                "versions": list(self.versions),
                "errors": list(self.errors),
            }

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def _loop(self) -> None:
        import grpc
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        with grpc.insecure_channel(self.target) as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            kinds = ("rest", "grpc")
            n = 0
            while not self._stop.is_set():
                histories = self._histories
                if not histories:
                    time.sleep(self.pause)
                    continue
                kind = kinds[n % 2]
                n += 1
                history = random.choice(histories)
                try:
                    if kind == "rest":
                        version = self._rest(history)
                    else:
                        version = self._grpc(stub, history)
                    failed = None
                except Exception as e:  # Every failure is counted, never raised.
                    failed, version = f"{kind}: {type(e).__name__}: {e}"[:300], None
                with self._lock:
                    self.requests[kind] += 1
                    if failed:
                        self.failures[kind] += 1
                        if len(self.errors) < 5:
                            self.errors.append(failed)
                    if version is not None and version not in self.versions:
                        self.versions.append(version)
                time.sleep(self.pause)

    def _rest(self, history: list[str]) -> None:  # Its answer names no version.
        ids, _ = client.recommend_rest(
            self.url, self.model, history, timeout=self.timeout
        )
        if not ids:
            raise ValueError("an answer without items")

    def _grpc(self, stub, history: list[str]) -> int:
        response = stub.Predict(
            client.grpc_request(self.model, history), timeout=self.timeout
        )
        ids, _ = client.grpc_answer(response)
        if not ids:
            raise ValueError("an answer without items")
        return response.model_spec.version.value

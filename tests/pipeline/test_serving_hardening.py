"""`genni serve` against what real clients (and operators) send: bad version
directories, foreign SavedModels, ports in use, lying gRPC tensors, HTTP
framing tricks, concurrency and idle connections.

Tests share one tiny trained model and one server; they run in file order and
add versions 5 to 7 to the server's MODEL_BASE as they go.
"""

import http.client
import json
import logging
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request

import grpc
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from genni.pipeline.cli import main as cli
from genni.pipeline.serving import predict, warmup
from genni.pipeline.serving import server as serving
from genni.pipeline.serving.probe import wait_until
from tests.conftest import train_and_export

PREDICT = "/v1/models/genni:predict"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    _, base, path, items = train_and_export(
        tmp_path_factory.mktemp("harden"),
        num_users=200,
        num_items=40,
        seed=3,
        max_len=6,
        hidden_size=8,
    )
    return base, path, items


@pytest.fixture(scope="module")
def server(exported):
    base, _, _ = exported
    srv = serving.Server(base, rest_port=0, grpc_port=0, poll_seconds=0.1).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def stub(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def _rest(srv, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{srv.rest_port}{path}", data)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _served(srv) -> int:
    return int(_rest(srv, "/v1/models/genni")[1]["model_version_status"][0]["version"])


def _add_version(base, source, name, corrupt=None):
    """Copy `source` to base/`name` atomically, optionally corrupting it first."""
    staging = os.path.join(base, f".staging-{name}")
    shutil.copytree(source, staging)
    if corrupt:
        corrupt(staging)
    os.rename(staging, os.path.join(base, name))
    return os.path.join(base, name)


def _truncate_variables(path):
    variables = os.path.join(path, "variables")
    for name in os.listdir(variables):
        if name.startswith("variables.data-"):
            with open(os.path.join(variables, name), "r+b") as f:
                f.truncate(16)


def _foreign_savedmodel(path):
    """A valid SavedModel that is not a GenNi export: one `double` signature."""
    module = tf.Module()
    module.double = tf.function(
        lambda x: {"y": 2.0 * x}, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    tf.saved_model.save(module, path, signatures={"serving_default": module.double})


class Load:
    """REST predict requests from `threads` threads until stopped."""

    def __init__(self, srv, history, threads=3):
        self.failures, self.answers = [], 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

        def stream():
            while not self._stop.is_set():
                status, body = _rest(srv, PREDICT, {"instances": [history]})
                with self._lock:
                    if status == 200:
                        self.answers += 1
                    else:
                        self.failures.append((status, body))

        self._threads = [threading.Thread(target=stream) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join()


def test_bad_version_directories_are_skipped_once_and_polling_goes_on(
    exported, server, caplog
):
    base, path, items = exported
    caplog.set_level(logging.INFO, logger="genni.pipeline.serving.server")
    assert _served(server) == 1
    _add_version(base, path, "\u00b2")  # "²".isdigit(), but int("²") fails.
    _add_version(base, path, "5", corrupt=_truncate_variables)
    assert wait_until(lambda: 5 in server.repository.refused, 30)
    time.sleep(1.0)  # About ten more polls.
    assert _served(server) == 1
    refusals = [r for r in caplog.records if "version 5" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.ERROR
    _add_version(base, path, "6")
    assert wait_until(lambda: _served(server) == 6, 60)
    status, body = _rest(server, PREDICT, {"instances": [[items[0]]]})
    assert status == 200 and len(body["predictions"][0]["item_ids"]) == 5


def test_foreign_savedmodel_is_refused_and_the_old_version_serves_on(exported, server):
    base, _, items = exported
    load = Load(server, [items[1], items[2]])
    try:
        time.sleep(0.3)
        staging = os.path.join(base, ".staging-7")
        _foreign_savedmodel(staging)
        os.rename(staging, os.path.join(base, "7"))
        assert wait_until(lambda: 7 in server.repository.refused, 60)
        time.sleep(0.5)
    finally:
        load.stop()
    assert "not a GenNi export" in server.repository.refused[7]
    assert load.failures == [] and load.answers > 10
    assert _served(server) == 6


def test_start_up_serves_the_newest_version_that_loads(exported, tmp_path):
    _, path, _ = exported
    base = str(tmp_path / "models")
    os.makedirs(base)
    _add_version(base, path, "1")
    _add_version(base, path, "2", corrupt=_truncate_variables)
    _add_version(base, path, "\u00b2")
    srv = serving.Server(base, rest_port=0, grpc_port=0)
    try:
        assert srv.repository.served.version == 1
        assert set(srv.repository.refused) == {2}
    finally:
        srv.stop()
    shutil.rmtree(os.path.join(base, "1"))
    with pytest.raises(FileNotFoundError, match="version 2"):
        serving.Server(base, rest_port=0, grpc_port=0)


def test_a_port_in_use_is_an_error_at_start_up(exported, server, capsys):
    base, _, _ = exported
    for ports in (
        {"rest_port": 0, "grpc_port": server.grpc_port},
        {"rest_port": server.rest_port, "grpc_port": 0},
    ):
        port = ports["grpc_port"] or ports["rest_port"]
        with pytest.raises(serving.PortInUseError, match=f"port {port} "):
            serving.Server(base, **ports).stop()  # stop(): only if the bug is back.
    args = ["serve", "--model-base-path", base, "--grpc-port", "0"]
    rest = ["--rest-port", str(server.rest_port)]
    assert cli.main(args + rest) == cli.EXIT_USAGE
    assert f"REST port {server.rest_port} " in capsys.readouterr().err


def _proto(dtype, dims, **values):
    proto = tensor_pb2.TensorProto(
        dtype=dtype,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
        ),
        **values,
    )
    return proto


def _predict(stub, history, k=None, output_filter=(), signature=""):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "genni"
    request.model_spec.signature_name = signature
    request.inputs["history"].CopyFrom(history)
    if k is not None:
        request.inputs["k"].CopyFrom(k)
    request.output_filter.extend(output_filter)
    return stub.Predict(request, timeout=30)


def test_grpc_tensor_shape_must_match_its_values(server, stub, exported):
    _, _, items = exported
    item = items[0].encode()
    bad = [
        _proto(types_pb2.DT_STRING, [5, 5]),  # No values at all.
        _proto(types_pb2.DT_STRING, [10**9, 10**9], string_val=[item]),
        _proto(types_pb2.DT_STRING, [2, 2], string_val=[item] * 3),
        _proto(types_pb2.DT_STRING, [1, 1], string_val=[item] * 2),
        _proto(types_pb2.DT_STRING, [-1, 1], string_val=[item]),
        tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            tensor_shape=tensor_shape_pb2.TensorShapeProto(unknown_rank=True),
            string_val=[item],
        ),
    ]
    for history in bad:
        with pytest.raises(grpc.RpcError) as info:
            _predict(stub, history)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, history
    one = _proto(types_pb2.DT_STRING, [1, 1], string_val=[item])
    bad_k = [
        _proto(types_pb2.DT_INT32, []),  # No value.
        _proto(types_pb2.DT_INT32, [], int_val=[3, 4]),
        _proto(types_pb2.DT_INT32, [2], int_val=[3]),  # Not a scalar.
        _proto(types_pb2.DT_INT32, [], tensor_content=b"\x03\x00\x00\x00" * 2),
        _proto(types_pb2.DT_FLOAT, [], float_val=[3.0]),
    ]
    for k in bad_k:
        with pytest.raises(grpc.RpcError) as info:
            _predict(stub, one, k=k)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, k
    k = _proto(types_pb2.DT_INT32, [], tensor_content=b"\x03\x00\x00\x00")
    answer = _predict(stub, one, k=k)
    assert tf.make_ndarray(answer.outputs["item_ids"]).shape == (1, 3)
    answer = _predict(stub, _proto(types_pb2.DT_STRING, [2, 0]))  # Empty histories.
    assert tf.make_ndarray(answer.outputs["item_ids"]).shape == (2, 5)


def test_grpc_model_metadata_and_output_filter(server, stub, exported):
    _, _, items = exported
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "genni"
    request.metadata_field.append("signature_def")
    answer = stub.GetModelMetadata(request, timeout=30)
    assert answer.model_spec.version.value == _served(server)
    defs = get_model_metadata_pb2.SignatureDefMap()
    assert answer.metadata["signature_def"].Unpack(defs)
    assert set(defs.signature_def["top_k"].inputs) == {"history", "k"}
    assert set(defs.signature_def["serving_default"].outputs) >= {"item_ids", "scores"}
    for fields in ([], ["signature_def", "nope"]):
        del request.metadata_field[:]
        request.metadata_field.extend(fields)
        with pytest.raises(grpc.RpcError) as info:
            stub.GetModelMetadata(request, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    history = tf.make_tensor_proto([[items[0]]], dtype=tf.string)
    answer = _predict(stub, history, output_filter=["item_ids"])
    assert set(answer.outputs) == {"item_ids"}
    with pytest.raises(grpc.RpcError) as info:
        _predict(stub, history, output_filter=["item_ids", "nope"])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nope" in info.value.details()


def _exchange(srv, data: bytes, timeout=10.0) -> tuple[list, bool]:
    """Send raw bytes; the responses read within `timeout` and whether the
    server closed the connection."""
    with socket.create_connection(("127.0.0.1", srv.rest_port), timeout) as sock:
        sock.sendall(data)
        received = b""
        sock.settimeout(1.0)
        deadline = time.monotonic() + timeout
        closed = False
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                break  # Open, nothing more to say.
            if not chunk:
                closed = True
                break
            received += chunk
    responses = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        length = int(headers["Content-Length"])
        responses.append((int(lines[0].split()[1]), json.loads(rest[:length])))
        received = rest[length:]
    return responses, closed


def _post(body: bytes, headers: str) -> bytes:
    return (
        f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode("latin-1") + body
    )


def test_rest_framing_and_nesting(server, exported):
    _, _, items = exported
    nested = b"[" * 100_000 + b"]" * 100_000
    status, body = _exchange(
        server, _post(nested, f"Content-Length: {len(nested)}\r\n")
    )[0][0]
    assert status == 400 and "nested" in body["error"]

    get = b"GET /v1/models/genni HTTP/1.1\r\nHost: x\r\n\r\n"
    smuggle = b"0\r\n\r\n" + get
    responses, closed = _exchange(
        server,
        _post(
            smuggle,
            f"Content-Length: {len(smuggle)}\r\nTransfer-Encoding: chunked\r\n",
        ),
    )
    assert [r[0] for r in responses] == [400] and closed
    assert "Content-Length and Transfer-Encoding" in responses[0][1]["error"]

    payload = json.dumps({"instances": [[items[0], items[1]]]}).encode()
    chunked = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n"
        for part in (payload[:7], payload[7:])
    )
    responses, closed = _exchange(
        server,
        _post(chunked + b"0\r\n\r\n", "Transfer-Encoding: chunked\r\n") + get,
        timeout=3,
    )
    assert [r[0] for r in responses] == [200, 200] and not closed
    assert len(responses[0][1]["predictions"][0]["item_ids"]) == 5

    big = serving.MAX_REQUEST_BYTES + 10
    oversize = f"{big:x}\r\n".encode() + b"x" * big + b"\r\n0\r\n\r\n"
    responses, closed = _exchange(
        server, _post(oversize, "Transfer-Encoding: chunked\r\n")
    )
    assert [r[0] for r in responses] == [413] and closed
    responses, closed = _exchange(
        server, _post(b"3\r\nabc\r\n", "Transfer-Encoding: gzip, chunked\r\n")
    )
    assert [r[0] for r in responses] == [501] and closed

    for length in ("-5", "abc", "1, 2"):
        responses, closed = _exchange(
            server, _post(b"{}", f"Content-Length: {length}\r\n"), timeout=5
        )
        assert [r[0] for r in responses] == [400] and closed, length
        assert "Content-Length" in responses[0][1]["error"]

    responses, _ = _exchange(server, b"DELETE /v1/models/genni HTTP/1.1\r\n\r\n")
    assert responses[0][0] == 501 and "error" in responses[0][1]


def test_no_request_fails_at_concurrency_32(server, exported):
    _, _, items = exported
    payload = json.dumps({"instances": [[items[2]]]})
    failures, answers, lock = [], [], threading.Lock()
    start = threading.Barrier(32)

    def client(keep_alive: bool) -> None:
        start.wait()
        conn = None
        try:
            for _ in range(6):
                if conn is None:
                    conn = http.client.HTTPConnection(
                        "127.0.0.1", server.rest_port, timeout=60
                    )
                try:
                    conn.request("POST", PREDICT, body=payload)
                    response = conn.getresponse()
                    ok = response.status == 200 and response.read()
                    with lock:
                        (answers if ok else failures).append(response.status)
                except OSError as e:
                    with lock:
                        failures.append(repr(e))
                if not keep_alive:
                    conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()

    for keep_alive in (True, False):
        threads = [
            threading.Thread(target=client, args=(keep_alive,)) for _ in range(32)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        start.reset()
    assert failures == [] and len(answers) == 2 * 32 * 6


def test_connections_are_bounded_and_idle_ones_closed(server, exported, monkeypatch):
    _, _, items = exported
    assert wait_until(lambda: server.http.active == 0, 10)
    monkeypatch.setattr(server.http, "max_connections", 2)
    monkeypatch.setattr(server.http, "queue_seconds", 0.3)
    idle = [socket.create_connection(("127.0.0.1", server.rest_port)) for _ in "ab"]
    try:
        assert wait_until(lambda: server.http.active == 2, 10)
        status, body = _rest(server, PREDICT, {"instances": [[items[0]]]})
        assert status == 503 and "busy" in body["error"]
    finally:
        idle.pop().close()
    assert wait_until(lambda: server.http.active == 1, 10)
    assert _rest(server, PREDICT, {"instances": [[items[0]]]})[0] == 200
    idle.pop().close()

    monkeypatch.setattr(server.http, "max_connections", serving.MAX_CONNECTIONS)
    assert server.http.RequestHandlerClass.timeout == serving.IDLE_TIMEOUT_SECONDS
    handler = serving.make_rest_handler(server.repository, idle_timeout=0.3)
    monkeypatch.setattr(server.http, "RequestHandlerClass", handler)
    with socket.create_connection(("127.0.0.1", server.rest_port), 10) as sock:
        started = time.monotonic()
        assert sock.recv(1024) == b""  # Closed by the server, not by our timeout.
        assert time.monotonic() - started < 5


def test_a_version_is_warmed_up_before_it_takes_traffic(exported, monkeypatch):
    _, path, _ = exported
    requests = warmup.read(path)  # Written by `genni export` for TF Serving too.
    assert {
        (r.model_spec.signature_name, r.inputs["history"].tensor_shape.dim[0].size)
        for r in requests
    } == {(s, b) for s in ("serving_default", "top_k") for b in warmup.BATCH_SIZES}
    calls = []
    run = predict.run_signature

    def record(model, signature, history, k):
        calls.append((signature, history.shape[0]))
        return run(model, signature, history, k)

    monkeypatch.setattr(predict, "run_signature", record)  # What warm_up calls.
    serving.load_servable(path, 1)
    assert {
        (signature, batch)
        for signature in ("serving_default", "top_k")
        for batch in warmup.BATCH_SIZES
    } <= set(calls)

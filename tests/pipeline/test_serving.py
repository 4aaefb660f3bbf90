"""Export round trip, and the TF Serving-compatible endpoint over REST and gRPC."""

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from genni.pipeline.serving import client, export
from genni.pipeline.serving import server as serving
from genni.pipeline.training import train
from tests.conftest import train_and_export


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    # FilterMix here (SASRec in test_batch, test_ann...): the served answers
    # of an encoder other than the first one equal its in-process scores.
    return train_and_export(
        tmp_path_factory.mktemp("serve"),
        num_users=300,
        num_items=80,
        seed=2,
        heads=2,
        encoder="filtermix",
    )


@pytest.fixture(scope="module")
def server(exported):
    _, base, _, _ = exported
    srv = serving.Server(base, rest_port=0, grpc_port=0, poll_seconds=0.2).start()
    yield srv
    srv.stop()


def _rest(srv, path, body=None, raw=None):
    data = (
        raw
        if raw is not None
        else (None if body is None else json.dumps(body).encode())
    )
    request = urllib.request.Request(
        f"http://127.0.0.1:{srv.rest_port}{path}", data=data
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_export_layout_and_round_trip(exported):
    run, base, path, items = exported
    assert path == os.path.join(base, "1")
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    assert export.next_version(base) == 2
    with pytest.raises(FileExistsError, match="--version"):
        export.export(run, base, version=1)
    model = tf.saved_model.load(path)
    assert set(model.signatures) == {"serving_default", "top_k", "user_embedding"}
    history = [items[3], items[10], "unknown-id", items[7]]
    out = model.signatures["serving_default"](history=tf.constant([history]))
    got_ids = [b.decode() for b in out["item_ids"].numpy()[0]]
    want_ids, want_scores = export.reference_top_k(
        train.load_run(run), items, history, 8, 5
    )
    assert got_ids == want_ids
    np.testing.assert_allclose(
        out["scores"].numpy()[0], want_scores, rtol=1e-4, atol=1e-5
    )
    assert not set(got_ids) & set(history)  # Seen items never come back.
    embedding = model.signatures["user_embedding"](history=tf.constant([history]))
    assert embedding["embedding"].shape == (1, 16)


def test_the_export_holds_core_tensorflow_ops_only(exported):
    """Stock TF Serving loads it: every op of every function is one of core
    TensorFlow's, none runs Python (PyFunc)."""
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    _, _, path, _ = exported
    assert export.read_settings(path)["model"] == "filtermix"
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}
    unknown = sorted(op for op in ops if op_def_registry.get(op) is None)
    assert unknown == []
    variables = tf.train.list_variables(os.path.join(path, "variables", "variables"))
    assert any("filter_dropout" in name for name, _ in variables)  # FilterMix


def test_unknown_or_empty_history_falls_back_to_popular_items(exported):
    _, _, path, _ = exported
    model = tf.saved_model.load(path)
    out = model.signatures["top_k"](
        history=tf.constant([["", ""], ["nope", ""]]), k=tf.constant(3)
    )
    ids = out["item_ids"].numpy()
    assert (ids[0] == ids[1]).all() and len(set(ids[0])) == 3


def test_rest_grpc_and_savedmodel_agree(exported, server):
    _, _, path, items = exported
    history = [items[1], items[2], items[4]]
    model = tf.saved_model.load(path)
    direct = model.signatures["serving_default"](history=tf.constant([history]))
    want_ids = [b.decode() for b in direct["item_ids"].numpy()[0]]
    want_scores = direct["scores"].numpy()[0]

    status, body = _rest(server, "/v1/models/genni:predict", {"instances": [history]})
    assert status == 200
    assert body["predictions"][0]["item_ids"] == want_ids
    np.testing.assert_allclose(
        body["predictions"][0]["scores"], want_scores, rtol=1e-5, atol=1e-5
    )
    status, body = _rest(
        server,
        "/v1/models/genni/versions/1:predict",
        {"inputs": {"history": [history]}},
    )
    assert status == 200 and body["outputs"]["item_ids"][0] == want_ids

    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "genni"
    request.model_spec.signature_name = "serving_default"
    request.inputs["history"].CopyFrom(tf.make_tensor_proto([history], dtype=tf.string))
    response = stub.Predict(request, timeout=30)
    ids = [b.decode() for b in tf.make_ndarray(response.outputs["item_ids"])[0]]
    assert ids == want_ids
    scores = tf.make_ndarray(response.outputs["scores"])[0]
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    assert response.model_spec.version.value == 1

    status_stub = model_service_pb2_grpc.ModelServiceStub(channel)
    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = "genni"
    answer = status_stub.GetModelStatus(status_request, timeout=10)
    assert (
        answer.model_version_status[0].state
        == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    )

    ids, _ = client.recommend_rest(
        f"http://127.0.0.1:{server.rest_port}", "genni", history, k=3
    )
    assert ids == want_ids[:3]
    local_ids, _ = client.recommend_local(os.path.dirname(path), history)
    assert local_ids == want_ids


@pytest.mark.parametrize(
    "path, body, status, message",
    [
        ("/v1/models/genni:predict", {"instances": []}, 400, "non-empty"),
        ("/v1/models/genni:predict", {"inputs": {"history": []}}, 400, "non-empty"),
        ("/v1/models/genni:predict", {"instances": [[1, 2]]}, 400, "item-id strings"),
        ("/v1/models/genni:predict", {"instances": ["I1"]}, 400, "list of item-id"),
        (
            "/v1/models/genni:predict",
            {"inputs": {"history": "I1"}},
            400,
            "list of lists",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [{"history": ["a"], "k": 0}]},
            400,
            "`k` must be between",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [{"history": ["a"], "k": 10**6}]},
            400,
            "`k` must be between",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [{"history": ["a"], "k": "3"}]},
            400,
            "integer",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [{"histroy": ["a"]}]},
            400,
            "Unknown inputs",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [["a"]], "inputs": {}},
            400,
            "exactly one",
        ),
        ("/v1/models/genni:predict", {"instances": [["a"]] * 2000}, 413, "At most"),
        ("/v1/models/genni:predict", {"instances": [["a"] * 5000]}, 413, "at most"),
        ("/v1/models/other:predict", {"instances": [["a"]]}, 404, "not found"),
        (
            "/v1/models/genni/versions/9:predict",
            {"instances": [["a"]]},
            404,
            "version 9",
        ),
        (
            "/v1/models/genni:predict",
            {"instances": [["a"]], "signature_name": "x"},
            400,
            "not found",
        ),
        ("/v1/nonsense", {"instances": [["a"]]}, 404, "Malformed request"),
    ],
)
def test_bad_requests_get_4xx_and_the_server_keeps_serving(
    server, exported, path, body, status, message
):
    got_status, got = _rest(server, path, body)
    assert got_status == status, got
    assert message in got["error"]
    assert (
        _rest(server, "/v1/models/genni:predict", {"instances": [[exported[3][0]]]})[0]
        == 200
    )


def test_malformed_and_oversize_bodies(server):
    status, body = _rest(server, "/v1/models/genni:predict", raw=b"{not json")
    assert status == 400 and "Malformed JSON" in body["error"]
    status, body = _rest(
        server, "/v1/models/genni:predict", raw=b"x" * (serving.MAX_REQUEST_BYTES + 1)
    )
    assert status == 413
    status, body = _rest(server, "/v1/models/genni")
    assert status == 200 and body["model_version_status"][0]["state"] == "AVAILABLE"
    status, body = _rest(server, "/v1/models/genni/metadata")
    assert "serving_default" in body["metadata"]["signature_def"]["signature_def"]


def test_grpc_bad_inputs(server):
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    )

    def call(**inputs):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = inputs.pop("name", "genni")
        for key, value in inputs.items():
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        with pytest.raises(grpc.RpcError) as info:
            stub.Predict(request, timeout=10)
        return info.value.code()

    assert call(history=np.array([1.0, 2.0])) == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        call(history=np.array(["a", "b"], dtype=object))
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (
        call(history=np.array([["a"]], dtype=object), k=np.int32(0))
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (
        call(name="other", history=np.array([["a"]], dtype=object))
        == grpc.StatusCode.NOT_FOUND
    )
    assert call() == grpc.StatusCode.INVALID_ARGUMENT


def test_hot_swap_under_load_has_no_failures(exported, server):
    _, base, path, items = exported
    failures, answers, stop = [], [], threading.Event()

    def stream():
        while not stop.is_set():
            status, body = _rest(
                server, "/v1/models/genni:predict", {"instances": [[items[0]]]}
            )
            (answers if status == 200 else failures).append(body)

    threads = [threading.Thread(target=stream) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    staging = os.path.join(base, ".staging-2")
    shutil.copytree(path, staging)
    os.rename(staging, os.path.join(base, "2"))
    deadline = time.time() + 60
    while time.time() < deadline:
        if (
            _rest(server, "/v1/models/genni")[1]["model_version_status"][0]["version"]
            == "2"
        ):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert (
        _rest(server, "/v1/models/genni")[1]["model_version_status"][0]["version"]
        == "2"
    )
    assert failures == [] and len(answers) > 10


def _wait(condition, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_probe_counts_every_answer_across_a_swap_and_every_failure(
    exported, tmp_path
):
    from genni.pipeline.serving.probe import ServeProbe

    _, base, _, items = exported
    models = tmp_path / "models"
    shutil.copytree(os.path.join(base, "1"), models / "1")
    probe = ServeProbe(str(models), str(tmp_path / "serve.log"), pause=0.01).start()
    try:
        probe.ask([[items[1], items[2]], [items[5]], []])
        _wait(lambda: probe.counts()["requests"] >= 10)
        # A new version lands as the guard writes one: whole, then renamed.
        shutil.copytree(models / "1", tmp_path / "staged")
        os.rename(tmp_path / "staged", models / "2")
        _wait(lambda: 2 in probe.counts()["versions"])
        counts = probe.counts()
        assert counts["failures"] == 0, counts["errors"]
        assert counts["versions"] == [1, 2]
        assert min(api["requests"] for api in counts["by_api"].values()) >= 5
        probe._process.kill()  # A server that dies: every request fails, counted.
        _wait(lambda: probe.counts()["failures"] >= 4)
        errors = probe.counts()["errors"]
        assert any(e.startswith("rest") for e in errors)
        assert any(e.startswith("grpc") for e in errors)
    finally:
        probe.stop()


def test_recommend_refuses_k_below_one_and_says_when_it_falls_back(exported, capsys):
    from genni.pipeline.cli import main as cli

    _, base, _, items = exported
    args = ["recommend", "--model-base-path", base, "--history"]
    for k in ("0", "-2"):
        assert cli.main([*args, items[1], "--k", k]) == 2
        assert f"--k must be at least 1; got {k}" in capsys.readouterr().err
    assert cli.main([*args, "nope", "never-seen", "--k", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.count(". ") == 3 and "no item of --history is known" in err
    assert cli.main([*args, items[1], items[2], "--k", "3"]) == 0
    assert "no item of --history is known" not in capsys.readouterr().err

"""A small client for GenNi endpoints (this server or stock TF Serving).

Each call returns the real items only: a row with fewer than k candidates
ends at its `num_results` (the filler slots, id "" with score -inf, are cut).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from genni.pipeline.serving import export


def _real(ids: list, scores: list, num_results: object = None) -> tuple[list, list]:
    """The first `num_results` items (all when the model does not say)."""
    n = len(ids) if num_results is None else int(num_results)
    return list(ids[:n]), list(scores[:n])


def recommend_rest(
    url: str, model: str, history: list[str], k: int | None = None, timeout: float = 10
) -> tuple[list[str], list[float]]:
    """Top-K over REST (`POST /v1/models/{model}:predict`)."""
    instance: dict = {export.HISTORY: list(history)}
    body: dict = {"instances": [instance]}
    if k is not None:
        body["signature_name"] = export.SIGNATURE_TOP_K
        instance[export.K] = k
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/models/{model}:predict",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            prediction = json.loads(response.read())["predictions"][0]
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")
        raise RuntimeError(f"The server answered {e.code}: {detail}") from None
    except urllib.error.URLError as e:
        raise RuntimeError(f"Cannot reach {url}: {e.reason}") from None
    return _real(
        prediction[export.ITEM_IDS],
        prediction[export.SCORES],
        prediction.get(export.NUM_RESULTS),
    )


def recommend_local(
    base_path: str, history: list[str], k: int | None = None
) -> tuple[list[str], list[float]]:
    """Top-K from the newest SavedModel under `base_path`, in this process."""
    import tensorflow as tf

    versions = [int(v) for v in os.listdir(base_path) if v.isdigit()]
    if not versions:
        raise FileNotFoundError(f"No model version under {base_path!r}.")
    model = tf.saved_model.load(os.path.join(base_path, str(max(versions))))
    inputs = {export.HISTORY: tf.constant([history])}
    if k is None:
        outputs = model.signatures["serving_default"](**inputs)
    else:
        outputs = model.signatures[export.SIGNATURE_TOP_K](**inputs, k=tf.constant(k))
    ids = [b.decode("utf-8") for b in outputs[export.ITEM_IDS].numpy()[0]]
    count = outputs.get(export.NUM_RESULTS)
    return _real(
        ids,
        outputs[export.SCORES].numpy()[0].tolist(),
        None if count is None else count.numpy()[0],
    )


def recommend_grpc(
    target: str, model: str, history: list[str], timeout: float = 10
) -> tuple[list[str], list[float]]:
    """Top-K over gRPC with TF Serving's own `PredictionServiceStub`."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(grpc_request(model, history), timeout=timeout)
    return grpc_answer(response)


def grpc_request(model: str, history: list[str]):
    """The `PredictRequest` of `serving_default` for one raw history."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "serving_default"
    request.inputs[export.HISTORY].CopyFrom(
        tf.make_tensor_proto([list(history)], dtype=tf.string)
    )
    return request


def grpc_answer(response) -> tuple[list[str], list[float]]:
    """(item ids, scores) of a `PredictResponse` of `grpc_request`."""
    import tensorflow as tf

    ids = tf.make_ndarray(response.outputs[export.ITEM_IDS])[0]
    scores = tf.make_ndarray(response.outputs[export.SCORES])[0]
    count = None
    if export.NUM_RESULTS in response.outputs:
        count = tf.make_ndarray(response.outputs[export.NUM_RESULTS])[0]
    return _real([b.decode("utf-8") for b in ids], scores.tolist(), count)

"""The gRPC endpoint: TF Serving's PredictionService and ModelService.

`PredictionServicer` answers `Predict` (with `output_filter`) and
`GetModelMetadata` (`signature_def`, a SignatureDefMap in an Any);
`ModelServicer` answers `GetModelStatus`. Bad input answers INVALID_ARGUMENT
(RESOURCE_EXHAUSTED when too large, NOT_FOUND for another model or version).
"""

from __future__ import annotations

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from genni.pipeline.serving import export
from genni.pipeline.serving.predict import (
    RequestError,
    history_from_proto,
    k_from_proto,
    run_signature,
)
from genni.pipeline.serving.repository import ModelRepository


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

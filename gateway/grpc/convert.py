"""KServe v2 gRPC messages (tritonclient's generated `service_pb2`) <-> engine tensors, and engine errors
-> gRPC status codes."""
from __future__ import annotations

import uuid
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from engine import errors
from engine.tensors.interface import InferRequest, Tensors, datatype_of
from gateway.auth import Forbidden, Unauthorized
from gateway.kserve.codec import check_shape, dtype_for, from_raw, to_raw
from gateway.limits import LimiterUnavailable, RateLimited
from grammars import GrammarError

_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
             "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
             "FP64": "fp64_contents", "BYTES": "bytes_contents"}
_CODES: dict[type[Exception], grpc.StatusCode] = {
    errors.InvalidRequest: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ModelNotFound: grpc.StatusCode.NOT_FOUND,
    errors.ModelNotReady: grpc.StatusCode.UNAVAILABLE,
    errors.Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.BackendUnavailable: grpc.StatusCode.UNAVAILABLE,
    GrammarError: grpc.StatusCode.INVALID_ARGUMENT,
    Unauthorized: grpc.StatusCode.UNAUTHENTICATED,
    Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    RateLimited: grpc.StatusCode.RESOURCE_EXHAUSTED,
    LimiterUnavailable: grpc.StatusCode.UNAVAILABLE,
}


def status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    for cls in type(exc).__mro__:
        if cls in _CODES:
            return _CODES[cls], getattr(exc, "message", str(exc))
    return grpc.StatusCode.INTERNAL, f"internal error: {exc}"


def parameter_value(p: pb.InferParameter) -> Any:
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which else None


def to_infer_request(message: pb.ModelInferRequest) -> InferRequest:
    raw = list(message.raw_input_contents)
    if raw and len(raw) != len(message.inputs):
        raise errors.InvalidRequest(f"{len(raw)} raw_input_contents for {len(message.inputs)} inputs")
    tensors: Tensors = {}
    for i, tensor in enumerate(message.inputs):
        if tensor.name in tensors:
            raise errors.InvalidRequest(f"input '{tensor.name}' is given twice", param=tensor.name)
        shape = check_shape(list(tensor.shape), tensor.name)
        tensors[tensor.name] = (from_raw(raw[i], tensor.datatype, shape, tensor.name) if raw
                                else _from_contents(tensor, shape))
    params = {k: parameter_value(v) for k, v in message.parameters.items()}
    return InferRequest(message.id or uuid.uuid4().hex, tensors, params)


def to_infer_response(outputs: Tensors, model: str, version: str, request_id: str,
                      wanted: list[str] | None = None, final: bool | None = None) -> pb.ModelInferResponse:
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id)
    _add_outputs(response, outputs, wanted, {})
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return response


class StreamResponses:
    """The responses of one streamed request. What every one repeats (model, version, request id, the
    `triton_final_response` parameter, each output's name, datatype and shape) is built once per request, and
    each response is a copy of that head plus the outputs' raw contents."""

    def __init__(self, model: str, version: str, request_id: str, wanted: list[str] | None = None) -> None:
        self._head = pb.ModelStreamInferResponse()
        head = self._head.infer_response
        head.model_name, head.model_version, head.id = model, version, request_id
        head.parameters["triton_final_response"].bool_param = False
        self._wanted = wanted
        self._metadata: dict[tuple, pb.ModelInferResponse.InferOutputTensor] = {}

    def response(self, outputs: Tensors, final: bool = False) -> pb.ModelStreamInferResponse:
        message = pb.ModelStreamInferResponse()
        message.CopyFrom(self._head)
        _add_outputs(message.infer_response, outputs, self._wanted, self._metadata)
        if final:
            message.infer_response.parameters["triton_final_response"].bool_param = True
        return message


# (name, dtype, shape) entries kept per request; a model with ever-new shapes builds the rest
_METADATA_CACHE = 16


def _add_outputs(response: pb.ModelInferResponse, outputs: Tensors, wanted: list[str] | None,
                 metadata: dict[tuple, pb.ModelInferResponse.InferOutputTensor]) -> None:
    for name, array in outputs.items():
        if wanted and name not in wanted:
            continue
        key = (name, array.dtype, array.shape)
        tensor = metadata.get(key)
        if tensor is None:
            tensor = pb.ModelInferResponse.InferOutputTensor(name=name, datatype=datatype_of(array),
                                                             shape=array.shape)
            if len(metadata) < _METADATA_CACHE:
                metadata[key] = tensor
        response.outputs.append(tensor)
        response.raw_output_contents.append(to_raw(array))


def _from_contents(tensor: pb.ModelInferRequest.InferInputTensor, shape: tuple[int, ...]) -> np.ndarray:
    field = _CONTENTS.get(tensor.datatype)
    if field is None:
        dtype_for(tensor.datatype, tensor.name)           # raises for an unknown datatype
        raise errors.InvalidRequest(f"input '{tensor.name}': {tensor.datatype} needs raw_input_contents",
                                    param=tensor.name)
    values = list(getattr(tensor.contents, field))
    if len(values) != int(np.prod(shape, dtype=np.int64)):
        raise errors.InvalidRequest(f"input '{tensor.name}': {len(values)} values do not fill shape {list(shape)}",
                                    param=tensor.name)
    if tensor.datatype == "BYTES":
        return np.array(values, dtype=np.object_).reshape(shape)
    return np.array(values, dtype=dtype_for(tensor.datatype, tensor.name)).reshape(shape)

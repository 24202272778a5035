"""KServe v2 gRPC messages (tritonclient's generated `service_pb2`) <-> engine tensors, and engine errors
-> gRPC status codes."""
from __future__ import annotations

import uuid
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

from conch.engine import errors
from conch.engine.tensors.interface import InferRequest, Tensors, datatype_of
from conch.gateway.errors import to_api_error
from conch.gateway.kserve.codec import check_shape, dtype_for, from_raw, to_raw
from conch.gateway.kserve.shared_memory import ShmReference, SystemSharedMemory

_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
             "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
             "FP64": "fp64_contents", "BYTES": "bytes_contents"}
# The gRPC status code of each HTTP status (gRPC's own HTTP mapping, read backwards); the status comes from
# the gateway's one error table (gateway/errors.py), so HTTP and gRPC answer every failure alike.
GRPC_CODES: dict[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED, 404: grpc.StatusCode.NOT_FOUND, 409: grpc.StatusCode.ALREADY_EXISTS,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED, 429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    499: grpc.StatusCode.CANCELLED, 500: grpc.StatusCode.INTERNAL, 501: grpc.StatusCode.UNIMPLEMENTED,
    502: grpc.StatusCode.UNAVAILABLE, 503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.DEADLINE_EXCEEDED,
}


def grpc_code(status: int) -> grpc.StatusCode:
    """A status no row names: INVALID_ARGUMENT below 500 (a request error), INTERNAL from 500 on."""
    return GRPC_CODES.get(status) or (grpc.StatusCode.INVALID_ARGUMENT if status < 500 else grpc.StatusCode.INTERNAL)


def status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    err = to_api_error(exc)
    return grpc_code(err.status), err.message


def parameter_value(p: pb.InferParameter) -> Any:
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which else None


def to_infer_request(message: pb.ModelInferRequest, shm: SystemSharedMemory | None = None) -> InferRequest:
    """Inputs from raw_input_contents (one per input not in shared memory, in order), typed contents, or a
    registered shared memory region."""
    refs = [ShmReference.from_parameters(_params(t.parameters), t.name) for t in message.inputs]
    raw = iter(message.raw_input_contents)
    in_body = sum(ref is None for ref in refs)
    if message.raw_input_contents and len(message.raw_input_contents) != in_body:
        raise errors.InvalidRequest(f"{len(message.raw_input_contents)} raw_input_contents for {in_body} inputs")
    tensors: Tensors = {}
    for tensor, ref in zip(message.inputs, refs, strict=True):
        if tensor.name in tensors:
            raise errors.InvalidRequest(f"input '{tensor.name}' is given twice", param=tensor.name)
        shape = check_shape(list(tensor.shape), tensor.name)
        if ref is not None:
            if shm is None:
                raise errors.InvalidRequest(f"input '{tensor.name}': shared memory is not available here",
                                            param=tensor.name)
            tensors[tensor.name] = shm.read(ref, tensor.datatype, shape, tensor.name)
        elif message.raw_input_contents:
            tensors[tensor.name] = from_raw(next(raw), tensor.datatype, shape, tensor.name)
        else:
            tensors[tensor.name] = _from_contents(tensor, shape)
    return InferRequest(message.id or uuid.uuid4().hex, tensors, _params(message.parameters))


Wanted = dict[str, ShmReference | None]     # requested outputs (empty: all), each maybe into shared memory


def requested_outputs(message: pb.ModelInferRequest) -> Wanted:
    wanted: Wanted = {}
    for output in message.outputs:
        params = _params(output.parameters)
        wanted[output.name] = ShmReference.from_parameters(params, output.name)
    return wanted


def class_counts(message: pb.ModelInferRequest) -> dict[str, int]:
    """The classification extension's counts (tritonclient's `class_count`), by output."""
    counts = {o.name: _params(o.parameters).get("classification", 0) for o in message.outputs}
    return {name: n for name, n in counts.items() if n}


def _params(parameters) -> dict[str, Any]:
    return {k: parameter_value(v) for k, v in parameters.items()}


def to_infer_response(outputs: Tensors, model: str, version: str, request_id: str,
                      wanted: Wanted | None = None, final: bool | None = None,
                      shm: SystemSharedMemory | None = None) -> pb.ModelInferResponse:
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id)
    _add_outputs(response, outputs, wanted, {}, shm)
    if final is not None:
        response.parameters["triton_final_response"].bool_param = final
    return response


class StreamResponses:
    """The responses of one streamed request. What every one repeats (model, version, request id, the
    `triton_final_response` parameter, each output's name, datatype and shape) is built once per request, and
    each response is a copy of that head plus the outputs' raw contents."""

    def __init__(self, model: str, version: str, request_id: str, wanted: Wanted | None = None,
                 shm: SystemSharedMemory | None = None) -> None:
        self._head = pb.ModelStreamInferResponse()
        head = self._head.infer_response
        head.model_name, head.model_version, head.id = model, version, request_id
        head.parameters["triton_final_response"].bool_param = False
        self._wanted, self._shm = wanted, shm
        self._metadata: dict[tuple, pb.ModelInferResponse.InferOutputTensor] = {}

    def response(self, outputs: Tensors, final: bool = False) -> pb.ModelStreamInferResponse:
        message = pb.ModelStreamInferResponse()
        message.CopyFrom(self._head)
        _add_outputs(message.infer_response, outputs, self._wanted, self._metadata, self._shm)
        if final:
            message.infer_response.parameters["triton_final_response"].bool_param = True
        return message


# (name, dtype, shape) entries kept per request; a model with ever-new shapes builds the rest
_METADATA_CACHE = 16


def _add_outputs(response: pb.ModelInferResponse, outputs: Tensors, wanted: Wanted | None,
                 metadata: dict[tuple, pb.ModelInferResponse.InferOutputTensor],
                 shm: SystemSharedMemory | None) -> None:
    """Each output's head and raw contents; one written into shared memory carries its region's parameters
    and an empty raw entry (raw contents stay aligned with the outputs, as tritonclient reads them)."""
    for name, array in outputs.items():
        if wanted and name not in wanted:
            continue
        ref = wanted.get(name) if wanted else None
        if ref is not None and shm is not None:
            shm.write(ref, array, name)
            tensor = pb.ModelInferResponse.InferOutputTensor(name=name, datatype=datatype_of(array),
                                                             shape=array.shape)
            for param, value in ref.as_parameters().items():
                setattr(tensor.parameters[param], "string_param" if isinstance(value, str) else "int64_param", value)
            response.outputs.append(tensor)
            response.raw_output_contents.append(b"")
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

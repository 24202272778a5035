"""Triton's generate mapping between a JSON body and a model's named tensors (as Triton's HTTP server does).

In: every top-level key but `id` and `parameters` names an input; so does every `parameters` entry whose name
is an input of the model (the TensorRT-LLM ensemble's `max_tokens`, `bad_words`, `stop_words`), the others
staying request parameters. A value converts by the input's declared datatype; a model that batches
(`max_batch_size > 0`) gets a leading batch dimension of 1, so a scalar for dims [1] arrives as shape [1, 1].
Out: each output tensor flattened; one element is a JSON scalar, more a list.
"""
from __future__ import annotations

import uuid
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.loaded_model import LoadedModel
from conch.engine.repository.specs import TensorSpec
from conch.engine.tensors.interface import InferRequest, Tensors
from conch.gateway.kserve.codec import from_json_data, json_shape, to_json_data

_RESERVED = ("id", "parameters")


def to_infer_request(body: dict[str, Any], inputs: tuple[TensorSpec, ...], batched: bool,
                     stream: bool) -> InferRequest:
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidRequest("'parameters' must be a JSON object", param="parameters")
    specs = {s.name: s for s in inputs}
    given = {k: v for k, v in body.items() if k not in _RESERVED}
    unknown = sorted(k for k in given if k not in specs)
    if unknown:
        raise InvalidRequest(f"unknown input '{unknown[0]}'; the model's inputs are {sorted(specs)}",
                             param=unknown[0])
    as_inputs = {k: v for k, v in parameters.items() if k in specs and k not in given}
    tensors: Tensors = {name: _tensor(value, specs[name], batched) for name, value in {**given, **as_inputs}.items()}
    rest = {k: v for k, v in parameters.items() if k not in as_inputs}
    if not stream and "stream" in tensors and tensors["stream"].reshape(-1)[:1].tolist() == [True]:
        raise InvalidRequest("'stream' true asks for many responses: use generate_stream", param="stream")
    rest["stream"] = rest.get("stream", True) if stream else False
    request_id = body.get("id")
    return InferRequest(str(request_id) if request_id is not None else uuid.uuid4().hex, tensors, rest)


def _tensor(value: Any, spec: TensorSpec, batched: bool):
    shape = json_shape(value, spec.name)
    array = from_json_data(value, spec.datatype, shape, spec.name)
    return array.reshape((1, *shape)) if batched else array


def to_json_response(outputs: Tensors, model: LoadedModel, request_id: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": str(request_id)} if request_id is not None else {}
    out.update(model_name=model.name, model_version=model.config.version)
    for name, array in outputs.items():
        values = to_json_data(array)
        out[name] = values[0] if len(values) == 1 else values
    return out

"""Triton's generate extension: POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream.

Request `{"id"?, "text_input", "parameters": {...}, ...other named inputs}`; response `{"id"? (only when
given), "model_name", "model_version", "text_output", ...other outputs}`. generate_stream answers one
`data: <json>\\n\\n` event per response, no [DONE]; a failure after the start is one error event.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import APIRouter, Request

from engine.errors import InvalidRequest
from engine.loaded_model import LoadedModel
from engine.repository.specs import TensorSpec
from engine.tensors.interface import InferRequest, Tensors
from engine.tensors.llm import tensor_model
from gateway.errors import to_api_error
from gateway.kserve.codec import from_json_data, json_shape, to_json_data
from gateway.kserve.state import TritonState, triton_state
from gateway.streaming import prime, sse_event, sse_response, until_disconnect

router = APIRouter()


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError) as exc:   # JSONDecodeError, UnicodeDecodeError, a 4,300-digit int
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return body


def to_infer_request(body: dict[str, Any], inputs: tuple[TensorSpec, ...], stream: bool) -> InferRequest:
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidRequest("'parameters' must be a JSON object", param="parameters")
    parameters = {**parameters, "stream": parameters.get("stream", True) if stream else False}
    specs = {s.name: s for s in inputs}
    tensors: Tensors = {}
    for key, value in body.items():
        if key in ("id", "parameters"):
            continue
        spec = specs.get(key)
        if spec is None:
            raise InvalidRequest(f"unknown input '{key}'; the model's inputs are {sorted(specs)}", param=key)
        tensors[key] = from_json_data(value, spec.datatype, json_shape(value, key), key)
    request_id = body.get("id")
    return InferRequest(str(request_id) if request_id is not None else uuid.uuid4().hex, tensors, parameters)


def to_json_response(outputs: Tensors, model: LoadedModel, request_id: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": str(request_id)} if request_id is not None else {}
    out.update(model_name=model.name, model_version=model.config.version)
    for name, array in outputs.items():
        values = to_json_data(array)
        out[name] = values[0] if len(values) == 1 else values
    return out


async def _responses(state: TritonState, request: Request, model: str, version: str | None,
                     stream: bool) -> tuple[LoadedModel, Any, AsyncIterator[Tensors]]:
    body = await json_body(request)
    loaded = state.model(model, version)
    tm = tensor_model(state.engine, model, loaded.config.version)
    infer = to_infer_request(body, tm.inputs, stream)
    return loaded, body.get("id"), await prime(tm.infer(infer))


async def generate(request: Request, model: str, version: str | None = None) -> dict:
    state, started = triton_state(request), time.monotonic_ns()
    loaded, request_id, responses = await _responses(state, request, model, version, stream=False)
    stats = state.stats_for(loaded.name, loaded.config.version)
    try:
        outputs = await until_disconnect(request, _last(responses))
    except BaseException:
        stats.record(started, ok=False)
        raise
    stats.record(started, ok=True)
    return to_json_response(outputs, loaded, request_id)


async def generate_stream(request: Request, model: str, version: str | None = None):
    state, started = triton_state(request), time.monotonic_ns()
    loaded, request_id, responses = await _responses(state, request, model, version, stream=True)
    stats = state.stats_for(loaded.name, loaded.config.version)

    async def events() -> AsyncIterator[str]:
        ok = False
        try:
            async for outputs in responses:
                yield sse_event(to_json_response(outputs, loaded, request_id))
            ok = True
        except Exception as exc:
            yield sse_event({"error": to_api_error(exc).message})
        finally:
            stats.record(started, ok)
            await responses.aclose()

    return sse_response(events())


async def _last(responses: AsyncIterator[Tensors]) -> Tensors:
    last: Tensors = {}
    async for outputs in responses:
        last = outputs
    return last


for _suffix, _handler in (("generate", generate), ("generate_stream", generate_stream)):
    router.add_api_route(f"/v2/models/{{model}}/{_suffix}", _handler, methods=["POST"])
    router.add_api_route(f"/v2/models/{{model}}/versions/{{version}}/{_suffix}", _handler, methods=["POST"])

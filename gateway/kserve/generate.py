"""Triton's generate extension: POST /v2/models/{m}[/versions/{v}]/generate and /generate_stream.

Request `{"id"?, "text_input", "parameters": {...}, ...other named inputs}`; response `{"id"? (only when
given), "model_name", "model_version", "text_output", ...other outputs}`. generate_stream answers one
`data: <json>\\n\\n` event per response, no [DONE]; a failure after the start is one error event.
"""
from __future__ import annotations

import json
from typing import Any, AsyncGenerator, AsyncIterator

from fastapi import APIRouter, Request

from conch.engine.errors import InvalidRequest
from conch.engine.loaded_model import LoadedModel
from conch.engine.tensors.contract import batches
from conch.engine.tensors.interface import Tensors
from conch.engine.tensors.llm import tensor_model
from conch.gateway.errors import to_api_error
from conch.gateway.kserve.generate_mapping import to_infer_request, to_json_response
from conch.gateway.kserve.state import TritonState, triton_state
from conch.gateway.streaming import prime, sse_event, sse_response, until_disconnect

router = APIRouter()


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError) as exc:   # JSONDecodeError, UnicodeDecodeError, a 4,300-digit int
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return body


async def _responses(state: TritonState, request: Request, model: str, version: str | None,
                     stream: bool) -> tuple[LoadedModel, Any, AsyncGenerator[Tensors, None]]:
    body = await json_body(request)
    loaded = state.model(model, version)
    tm = tensor_model(state.engine, model, loaded.config.version)
    infer = to_infer_request(body, tm.inputs, batches(loaded.config), stream)
    return loaded, body.get("id"), await prime(tm.infer(infer))


async def generate(request: Request, model: str, version: str | None = None) -> dict:
    loaded, request_id, responses = await _responses(triton_state(request), request, model, version, stream=False)
    outputs = await until_disconnect(request, _last(responses))
    return to_json_response(outputs, loaded, request_id)


async def generate_stream(request: Request, model: str, version: str | None = None):
    loaded, request_id, responses = await _responses(triton_state(request), request, model, version, stream=True)

    async def events() -> AsyncIterator[str]:
        try:
            async for outputs in responses:
                yield sse_event(to_json_response(outputs, loaded, request_id))
        except Exception as exc:
            yield sse_event({"error": to_api_error(exc).message})
        finally:
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

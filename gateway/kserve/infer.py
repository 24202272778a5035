"""POST /v2/models/{m}[/versions/{v}]/infer: one request, one response (streaming models use
generate_stream or gRPC ModelStreamInfer)."""
from __future__ import annotations

from typing import AsyncGenerator

from fastapi import APIRouter, Request, Response

from conch.engine.errors import InvalidRequest
from conch.engine.tensors.classification import classified
from conch.engine.tensors.interface import InferRequest, Tensors
from conch.engine.tensors.llm import tensor_model
from conch.gateway.kserve.state import TritonState, triton_state
from conch.gateway.kserve.tensors import HEADER, parse_infer, render_infer
from conch.gateway.streaming import until_disconnect

router = APIRouter()


async def single_response(state: TritonState, model: str, version: str | None, request: InferRequest) -> Tensors:
    """Run a request that must answer once (its trace reaches the statistics and the metrics)."""
    loaded = state.model(model, version)
    return await _only(tensor_model(state.engine, model, loaded.config.version).infer(request))


async def _only(responses: AsyncGenerator[Tensors, None]) -> Tensors:
    try:
        first = await responses.__anext__()
        async for _ in responses:
            raise InvalidRequest("the request asked for a stream of responses: use generate_stream or gRPC "
                                 "ModelStreamInfer", param="stream")
        return first
    except StopAsyncIteration:
        raise InvalidRequest("the model returned no response") from None
    finally:
        await responses.aclose()


async def infer(request: Request, model: str, version: str | None = None) -> Response:
    state = triton_state(request)
    state.model(model, version)                  # 404 before reading the body
    parsed = parse_infer(await request.body(), request.headers.get(HEADER), state.shm)
    outputs = await until_disconnect(request, single_response(state, model, version, parsed.request))
    loaded = state.model(model, version)
    outputs = classified(loaded, outputs, {w.name: w.classes for w in parsed.outputs or () if w.classes})
    body, header_length = render_infer(parsed, outputs, loaded.name, loaded.config.version, state.shm)
    if header_length is None:
        return Response(body, media_type="application/json")
    return Response(body, media_type="application/octet-stream", headers={HEADER: str(header_length)})


router.add_api_route("/v2/models/{model}/infer", infer, methods=["POST"])
router.add_api_route("/v2/models/{model}/versions/{version}/infer", infer, methods=["POST"])

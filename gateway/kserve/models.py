"""GET /v2, /v2/models/{m}[/versions/{v}] metadata, /ready, /config, /stats."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format

from conch.engine.errors import ModelNotFound
from conch.gateway.kserve import metadata
from conch.gateway.kserve.state import triton_state

router = APIRouter()
server_router = APIRouter()


@server_router.get("/v2")
async def server_metadata() -> dict:
    return metadata.server_metadata()


@router.get("/v2/models/stats")          # before /v2/models/{model}, which would match it
async def all_stats(request: Request) -> dict:
    return metadata.model_statistics(triton_state(request), None, None)


def _paths(suffix: str) -> list[str]:
    return [f"/v2/models/{{model}}{suffix}", f"/v2/models/{{model}}/versions/{{version}}{suffix}"]


def _route(suffix: str, method: str = "GET"):
    def register(fn):
        for path in _paths(suffix):
            router.add_api_route(path, fn, methods=[method])
        return fn
    return register


@_route("")
async def model_metadata(request: Request, model: str, version: str | None = None) -> dict:
    state = triton_state(request)
    loaded = state.model(model, version)
    return metadata.model_metadata(loaded, state.engine.versions(loaded.name))


@_route("/ready")
async def model_ready(request: Request, model: str, version: str | None = None) -> Response:
    state = triton_state(request)
    try:
        loaded = state.model(model, version)
    except ModelNotFound:
        return Response(status_code=404)
    except Exception:
        return Response(status_code=400)
    return Response(status_code=200 if state.engine.ready(loaded.name, loaded.config.version) else 400)


@_route("/config")
async def model_config(request: Request, model: str, version: str | None = None) -> dict:
    config = metadata.model_config(triton_state(request).model(model, version))
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


@_route("/stats")
async def model_stats(request: Request, model: str, version: str | None = None) -> dict:
    return metadata.model_statistics(triton_state(request), model, version)

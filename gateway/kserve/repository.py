"""Triton's repository extension: POST /v2/repository/index, /v2/repository/models/{m}/load|unload."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from engine.errors import InvalidRequest
from gateway.auth import may_use
from gateway.kserve.generate import json_body
from gateway.kserve.state import triton_state

router = APIRouter()


async def _optional_body(request: Request) -> dict:
    return await json_body(request) if (await request.body()).strip() else {}


@router.post("/v2/repository/index")
async def index(request: Request) -> list[dict]:
    ready = bool((await _optional_body(request)).get("ready", False))
    return [s.as_index() for s in triton_state(request).control.index(ready_only=ready) if may_use(s.name)]


@router.post("/v2/repository/models/{model}/load")
async def load(request: Request, model: str) -> Response:
    parameters = (await _optional_body(request)).get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidRequest("'parameters' must be a JSON object", param="parameters")
    await triton_state(request).control.load(model, parameters.get("config"))
    return Response(status_code=200)


@router.post("/v2/repository/models/{model}/unload")
async def unload(request: Request, model: str) -> Response:
    parameters = (await _optional_body(request)).get("parameters") or {}
    if not isinstance(parameters, dict) or not isinstance(parameters.get("unload_dependents", False), bool):
        raise InvalidRequest("'parameters.unload_dependents' must be a boolean", param="unload_dependents")
    await triton_state(request).control.unload(model, unload_dependents=parameters.get("unload_dependents", False))
    return Response(status_code=200)

"""Triton's repository extension: POST /v2/repository/index, /v2/repository/models/{m}/load|unload.

Loading and unloading are an administrator's acts: they need a key with the `admin` role (on an open server,
anyone). A failed load answers a short reason (no traceback, no server path); the log has the rest."""
from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from conch.engine.errors import EngineError, InvalidRequest, ModelCodeFailed
from conch.engine.model_control import ModelState
from conch.gateway.auth import may_use, require_role
from conch.gateway.errors import public_reason
from conch.gateway.kserve.generate import json_body
from conch.gateway.kserve.state import TritonState, triton_state

log = logging.getLogger(__name__)
router = APIRouter()


class LoadFailed(InvalidRequest):
    """A model failed to load for a reason inside the model (its weights, its code): 400, as Triton answers."""


def public_index(states: list[ModelState]) -> list[dict]:
    """The index entries a client may see: the request's key's models, with their reasons shortened."""
    return [{**s.as_index(), "reason": public_reason(s.reason)} for s in states if may_use(s.name)]


async def load_model(state: TritonState, name: str, config) -> None:
    """(Re)load `name`, with an optional config override; every failure becomes an EngineError with a short
    reason."""
    try:
        await state.control.load(name, config)
    except ModelCodeFailed as exc:              # the model's own code or files (a python model that does not
        raise LoadFailed(public_reason(exc.message)) from exc   # import): 400 as any failed load, not 503
    except EngineError as exc:
        exc.message = public_reason(exc.message)
        raise
    except Exception as exc:
        log.exception("loading model %s failed", name)
        raise LoadFailed(f"failed to load model '{name}': {public_reason(f'{type(exc).__name__}: {exc}')}") from exc


async def _optional_body(request: Request) -> dict:
    return await json_body(request) if (await request.body()).strip() else {}


@router.post("/v2/repository/index")
async def index(request: Request) -> list[dict]:
    ready = bool((await _optional_body(request)).get("ready", False))
    control = triton_state(request).control
    await control.refresh()
    return public_index(control.index(ready_only=ready))


@router.post("/v2/repository/models/{model}/load")
async def load(request: Request, model: str) -> Response:
    require_role(request, "admin")
    parameters = (await _optional_body(request)).get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidRequest("'parameters' must be a JSON object", param="parameters")
    await load_model(triton_state(request), model, parameters.get("config"))
    return Response(status_code=200)


@router.post("/v2/repository/models/{model}/unload")
async def unload(request: Request, model: str) -> Response:
    require_role(request, "admin")
    parameters = (await _optional_body(request)).get("parameters") or {}
    if not isinstance(parameters, dict) or not isinstance(parameters.get("unload_dependents", False), bool):
        raise InvalidRequest("'parameters.unload_dependents' must be a boolean", param="unload_dependents")
    await triton_state(request).control.unload(model, unload_dependents=parameters.get("unload_dependents", False))
    return Response(status_code=200)

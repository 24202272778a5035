"""HTTP routes of Triton's logging, trace and shared memory extensions (their state: logging_settings.py,
tracing.py, shared_memory.py; the gRPC face serves the same through gateway/grpc/service.py).

Reading a setting or a region's status needs only a key that may use the API; changing the log or trace
settings or the shared memory regions is an administrator's act (the `admin` role, when keys are configured).
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from conch.engine.errors import InvalidRequest
from conch.gateway.auth import require_role
from conch.gateway.kserve.generate import json_body
from conch.gateway.kserve.shared_memory import CUDA_REFUSAL
from conch.gateway.kserve.state import triton_state

router = APIRouter()


@router.get("/v2/logging")
async def get_logging(request: Request) -> dict:
    return triton_state(request).logging.settings.as_dict()


@router.post("/v2/logging")
async def update_logging(request: Request) -> dict:
    require_role(request, "admin")
    return triton_state(request).logging.update(await json_body(request)).as_dict()


@router.get("/v2/trace/setting")
async def get_trace(request: Request) -> dict:
    return triton_state(request).tracer.settings()


@router.post("/v2/trace/setting")
async def update_trace(request: Request) -> dict:
    require_role(request, "admin")
    return triton_state(request).tracer.update(await json_body(request))


@router.get("/v2/models/{model}/trace/setting")
async def get_model_trace(request: Request, model: str) -> dict:
    state = triton_state(request)
    state.model(model)                                     # 404 for a model not served
    return state.tracer.settings(model)


@router.post("/v2/models/{model}/trace/setting")
async def update_model_trace(request: Request, model: str) -> dict:
    require_role(request, "admin")
    state = triton_state(request)
    state.model(model)
    return state.tracer.update(await json_body(request), model)


@router.get("/v2/systemsharedmemory/status")
@router.get("/v2/systemsharedmemory/region/{region}/status")
async def shm_status(request: Request, region: str | None = None) -> list[dict]:
    return triton_state(request).shm.status(region)


@router.post("/v2/systemsharedmemory/region/{region}/register")
async def shm_register(request: Request, region: str) -> dict:
    require_role(request, "admin")
    body = await json_body(request)
    triton_state(request).shm.register(region, _text(body, "key"), _number(body, "offset", 0),
                                       _number(body, "byte_size"))
    return {}


@router.post("/v2/systemsharedmemory/unregister")
@router.post("/v2/systemsharedmemory/region/{region}/unregister")
async def shm_unregister(request: Request, region: str | None = None) -> dict:
    require_role(request, "admin")
    triton_state(request).shm.unregister(region)
    return {}


@router.get("/v2/cudasharedmemory/status")
@router.get("/v2/cudasharedmemory/region/{region}/status")
@router.post("/v2/cudasharedmemory/region/{region}/register")
@router.post("/v2/cudasharedmemory/unregister")
@router.post("/v2/cudasharedmemory/region/{region}/unregister")
async def cuda_shm(region: str | None = None) -> dict:
    raise InvalidRequest(CUDA_REFUSAL, param="cudasharedmemory")


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"'{key}' must be a non-empty string", param=key)
    return value


def _number(body: dict[str, Any], key: str, default: int | None = None) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"'{key}' must be an integer", param=key)
    return value

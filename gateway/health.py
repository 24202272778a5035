"""Liveness and readiness: /health and KServe v2's /v2/health/live|ready."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from conch.gateway.state import conch_state

router = APIRouter()


def _ready(request: Request) -> bool:
    models = conch_state(request).engine.all_versions()
    return bool(models) and all(m.backend.health() for m in models)


@router.get("/health")
async def health(request: Request) -> Response:
    return Response(status_code=200 if _ready(request) else 503)


@router.get("/v2/health/live")
async def live() -> Response:
    return Response(status_code=200)


@router.get("/v2/health/ready")
async def ready(request: Request) -> Response:
    """Triton's rule (ModelControl.ready): a server with nothing loaded in explicit mode is ready."""
    return Response(status_code=200 if request.app.state.triton.control.ready() else 503)

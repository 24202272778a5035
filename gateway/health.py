"""Liveness and readiness: /health and KServe v2's /v2/health/live|ready."""
from __future__ import annotations

from fastapi import APIRouter, Request, Response

from conch.gateway.state import conch_state

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> Response:
    """Engine.ready (the readiness every face asks), and at least one model served."""
    engine = conch_state(request).engine
    return Response(status_code=200 if engine.ready() and engine.all_versions() else 503)


@router.get("/v2/health/live")
async def live() -> Response:
    return Response(status_code=200)


@router.get("/v2/health/ready")
async def ready(request: Request) -> Response:
    """Engine.ready: a server with nothing loaded (explicit mode) is ready, as Triton's."""
    return Response(status_code=200 if conch_state(request).engine.ready() else 503)

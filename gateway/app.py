"""Builds the FastAPI application around an Engine."""
from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.engine import Engine
from engine.repository import ModelControl
from gateway import health, openai, playground
from gateway import kserve  # after openai: gateway.errors needs the openai package initialised first
from gateway.auth import Gate, guard
from gateway.errors import APIError, error_response, install_error_handlers
from gateway.grpc import start_grpc, stop_grpc
from gateway.metrics import Metrics, router as metrics_router
from gateway.state import ConchState, Settings


class BodyLimit:
    """413 for a request whose declared body exceeds the limit, before it is read."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers", [])).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.limit:
                from starlette.requests import Request

                err = APIError(413, f"request body of {int(length)} bytes exceeds the limit of {self.limit}",
                               code="payload_too_large")
                await error_response(Request(scope), err)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(engine: Engine | None = None, settings: Settings | None = None,
              load: list[str] | None = None, gate: Gate | None = None, metrics: bool = True,
              control: ModelControl | None = None, grpc_port: int | None = None) -> FastAPI:
    engine = engine or Engine()
    settings = settings or Settings()
    triton = kserve.TritonState(engine, control or ModelControl(engine))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await (control.start() if control is not None else engine.start(load))
        grpc_server = await start_grpc(triton, settings.host, grpc_port, gate) if grpc_port else None
        yield
        if grpc_server is not None:
            await stop_grpc(grpc_server)
        await (control.stop() if control is not None else engine.stop())
        for closable in (engine.cache, gate and gate.limiter):
            if closable:
                await closable.close()

    app = FastAPI(title="Conch", lifespan=lifespan)
    app.state.conch = ConchState(engine=engine, settings=settings)
    app.state.triton = triton
    install_error_handlers(app)
    app.state.gate = gate                  # API keys and rate limits; None = open
    if gate is not None and gate.limiter is not None:
        engine.observers.append(gate.limiter)
    if metrics:
        app.state.metrics = Metrics(engine, gate)
        engine.observers.append(app.state.metrics)
        app.include_router(metrics_router)
    app.include_router(health.router)
    app.include_router(playground.router)                  # static page; its API calls carry the key
    app.mount("/playground/static", playground.static_files(), name="playground")
    app.include_router(kserve.open_router)
    app.include_router(kserve.router, dependencies=[Depends(guard)])
    app.include_router(openai.router, dependencies=[Depends(guard)])
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app

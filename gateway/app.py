"""Builds the FastAPI application around an Engine."""
from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.engine import Engine
from gateway import health, openai
from gateway.errors import APIError, error_response, install_error_handlers
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
              load: list[str] | None = None) -> FastAPI:
    engine = engine or Engine()
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await engine.start(load)
        yield
        await engine.stop()

    app = FastAPI(title="Conch", lifespan=lifespan)
    app.state.conch = ConchState(engine=engine, settings=settings)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(openai.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app

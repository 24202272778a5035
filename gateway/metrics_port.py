"""`--metrics-port`: /metrics alone on a port of its own, without a key, as Triton's port 8002.

It binds loopback unless told otherwise (`--metrics-host`): the scraper is expected on the same machine or
network namespace, and the API port never serves the exposition to a key without the `metrics` role. The
server runs in the API server's event loop and leaves the process's signals to it."""
from __future__ import annotations

import asyncio
import contextlib

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


class _SideServer(uvicorn.Server):
    def capture_signals(self):          # the API server owns SIGINT/SIGTERM and stops this one in its lifespan
        return contextlib.nullcontext()


class MetricsPort:
    def __init__(self, metrics, host: str, port: int) -> None:
        async def scrape(request: Request) -> Response:
            return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

        app = Starlette(routes=[Route("/metrics", scrape)])
        self.server = _SideServer(uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning"))
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():                 # it could not bind: surface why
                self.task.result()
                raise OSError("the metrics port did not start")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task

"""Builds the FastAPI application around an Engine."""
from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, FastAPI

from conch.engine.engine import Engine
from conch.engine.model_control import ModelControl
from conch.gateway import anthropic, health, kserve, openai, playground, startup_gc
from conch.gateway.auth import Gate, KeyFirst, guard
from conch.gateway.bodies import BodyGuard
from conch.gateway.errors import CatchAll, install_error_handlers
from conch.gateway.grpc import start_grpc, stop_grpc
from conch.gateway.kserve.tracing import Tracer
from conch.gateway.metrics import Metrics, router as metrics_router
from conch.gateway.metrics_port import MetricsPort
from conch.gateway.openai.request_id import RequestIdHeader
from conch.gateway.records import RecordStore
from conch.gateway.state import ConchState, Settings
from conch.gateway.telemetry.otel import GenAISpans, TraceContext, grpc_interceptor, install


def build_app(engine: Engine | None = None, settings: Settings | None = None,
              load: list[str] | None = None, gate: Gate | None = None, metrics: bool = True,
              control: ModelControl | None = None, grpc_port: int | None = None,
              records: RecordStore | None = None) -> FastAPI:
    engine = engine or Engine()
    settings = settings or Settings()
    records = records or RecordStore()          # stored responses and conversations (memory by default)
    triton = kserve.TritonState(engine, control or ModelControl(engine),
                                tracer=Tracer(settings.trace_file, settings.trace_config.mode))
    engine.observers += [triton.statistics, triton.tracer]   # Triton's statistics and trace extensions
    telemetry = _opentelemetry(engine, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await (control.start() if control is not None else engine.start(load))
        grpc_server = await start_grpc(triton, settings.host, grpc_port, gate,
                                       telemetry.interceptors) if grpc_port else None
        side = MetricsPort(app.state.metrics, settings.metrics_host, settings.metrics_port) \
            if metrics and settings.metrics_port else None
        if side is not None:
            await side.start()
        startup_gc.resume()             # started: the collector runs again (startup_gc.py)
        yield
        if side is not None:
            await side.stop()
        if grpc_server is not None:
            await stop_grpc(grpc_server)
        await (control.stop() if control is not None else engine.stop())
        for closable in (engine.cache, gate and gate.limiter, records):
            if closable:
                await closable.close()
        telemetry.flush()

    app = FastAPI(title="Conch", lifespan=lifespan, **_NO_NATIVE_TELEMETRY)
    app.state.conch = ConchState(engine=engine, settings=settings, records=records)
    app.state.triton = triton
    install_error_handlers(app)
    app.state.gate = gate                  # API keys and rate limits; None = open
    if gate is not None:                   # each key's share of the record store's memory, kept on reloads
        records.share_among(len(gate.keys))
        gate.on_reload.append(lambda keys: records.share_among(len(keys)))
    if gate is not None and gate.limiter is not None:
        engine.observers.append(gate.limiter)
    if metrics:
        app.state.metrics = Metrics(engine, gate, records)
        engine.observers.append(app.state.metrics)
        app.include_router(metrics_router)
    app.include_router(health.router)
    app.include_router(playground.router)                  # static page; its API calls carry the key
    app.mount("/playground/static", playground.static_files(), name="playground")
    app.include_router(kserve.open_router)
    app.include_router(kserve.router, dependencies=[Depends(guard)])
    app.include_router(openai.router, dependencies=[Depends(guard)])
    app.include_router(openai.socket_router)                # WebSocket mode: checks the key at its handshake
    app.include_router(anthropic.router, dependencies=[Depends(guard)])
    app.add_middleware(CatchAll)                                       # the last added runs first: the key,
    app.add_middleware(BodyGuard, limit=settings.max_body_bytes)     # then the body, then a route; an error
    app.add_middleware(KeyFirst, gate=gate)                            # nothing handled becomes a clean 500
    app.add_middleware(RequestIdHeader)                                # on every /v1 answer, a 401 included
    if telemetry.enabled:
        app.add_middleware(TraceContext)                               # outermost: every request has its span
    return app


# FastAPI >= 0.16x traces, meters and logs requests by itself once a tracer provider is installed: Conch's own
# TraceContext makes the server span (the same on every FastAPI version, with traceparent out), and FastAPI's
# exception logs could carry request content onto the wire, so its native telemetry stays off.
_NO_NATIVE_TELEMETRY: dict[str, Any] = {"telemetry": {"tracing": False, "metrics": False, "logs": False}} \
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}


@dataclass
class _Telemetry:
    provider: Any = None                 # the SDK's TracerProvider (the [otel] extra), when installed
    interceptors: tuple = ()

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def flush(self) -> None:
        if self.provider is not None:
            self.provider.shutdown()             # the spans still batched are exported before exit


def _opentelemetry(engine: Engine, settings: Settings) -> _Telemetry:
    """`--trace-config mode=opentelemetry`: the SDK installed, the engine's requests become spans."""
    if not settings.trace_config.opentelemetry:
        return _Telemetry()
    provider = install(settings.trace_config)
    engine.observers.append(GenAISpans())
    return _Telemetry(provider, (grpc_interceptor(),))

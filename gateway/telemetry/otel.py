"""OpenTelemetry export (`--trace-config mode=opentelemetry`): the SDK with an OTLP exporter (HTTP or gRPC),
sampling one request in `rate` (a client's sampled `traceparent` is honoured: ParentBased), and the spans:

    SERVER   "POST /v1/chat/completions"  per HTTP request (W3C traceparent in; traceparent out on the response)
    SERVER   "grpc ModelInfer"            per gRPC call (traceparent in metadata, out in the initial metadata)
      INTERNAL "chat MODEL"               per engine request (GenAI conventions: operation, model, token usage,
                                          cached tokens, finish reasons), from the engine's Trace once it ends
        "queue", "prefill", "decode"      its phases (a tensor model's: "queue", "compute")
      an ensemble's steps, BLS calls      each a request of its own, so a span of its own
      CLIENT "chat UPSTREAM_MODEL"        the openai backend's upstream call (engine/backends/openai)
      INTERNAL "execute_tool NAME"        each MCP tool call (agents/mcp/client.py)

No prompt, completion, tool argument, header or query string is recorded."""
from __future__ import annotations

import contextvars
import time
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conch.engine.admission import Trace
from conch.engine.telemetry import TRACER
from conch.gateway.telemetry.config import TraceConfig

# The face's GenAI operation for the engine requests a route runs (the route knows; the engine does not).
OPERATIONS = {"/v1/chat/completions": "chat", "/v1/messages": "chat", "/v1/responses": "chat",
              "/v1/completions": "text_completion", "/v1/embeddings": "embeddings"}
operation: contextvars.ContextVar[str | None] = contextvars.ContextVar("conch_genai_operation", default=None)


def install(config: TraceConfig) -> Any:
    """The global tracer provider, exporting to `config.endpoint`; returned so the server can flush it."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    provider = TracerProvider(resource=Resource.create({"service.name": "conch", **config.resource}),
                              sampler=ParentBased(TraceIdRatioBased(1.0 / config.rate)))
    bsp: dict[str, Any] = dict(config.bsp)
    provider.add_span_processor(BatchSpanProcessor(_exporter(config), **bsp))
    trace.set_tracer_provider(provider)
    return provider


def _exporter(config: TraceConfig) -> Any:
    if config.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=config.endpoint, insecure=config.endpoint.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=config.endpoint)


class TraceContext:
    """Pure ASGI: the request's SERVER span, parented to the client's `traceparent`, current while the app
    runs (so the engine's spans are its children); the response carries its own `traceparent`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path, method = scope.get("path", ""), scope.get("method", "GET")
        token = operation.set(_operation(path))
        with TRACER.start_as_current_span(f"{method} {path}", context=propagate.extract(carrier),
                                          kind=SpanKind.SERVER, attributes={
                                              "http.request.method": method, "url.path": path,
                                              "url.scheme": scope.get("scheme", "http")}) as span:
            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":      # may run in another task: name the span
                    out: dict[str, str] = {}
                    propagate.inject(out, context=trace.set_span_in_context(span))
                    message = {**message, "headers": [*message.get("headers", []),
                                                      *((k.encode(), v.encode()) for k, v in out.items())]}
                    span.set_attribute("http.response.status_code", message["status"])
                    if message["status"] >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)
            try:
                await self.app(scope, receive, send_traced)
            finally:
                operation.reset(token)


def _operation(path: str) -> str | None:
    if path.startswith("/v2/") and path.endswith(("/generate", "/generate_stream")):
        return "text_completion"
    return OPERATIONS.get(path)


class GenAISpans:
    """An engine observer: each finished request becomes a span under the current one (the HTTP or gRPC
    request's, or an enclosing step's), with its phases as children, timed from the engine's Trace."""

    def on_finish(self, t: Trace) -> None:
        llm = t.request.prompt_token_ids is not None or t.request.prompt is not None or t.request.chat is not None
        op = (operation.get() or "text_completion") if llm else "infer"
        offset = time.time_ns() - time.monotonic_ns()
        ns = lambda s: int(s * 1e9) + offset          # noqa: E731 -- monotonic seconds -> epoch ns
        end = t.end or time.monotonic()
        span = TRACER.start_span(f"{op} {t.model}", start_time=ns(t.start), attributes=_attributes(t, op, llm))
        if t.error is not None or t.rejected:
            span.set_status(Status(StatusCode.ERROR, "rejected" if t.rejected else "error"))
            span.set_attribute("error.type", "overloaded" if t.rejected else "engine_error")
        context = trace.set_span_in_context(span)
        queue_start = t.start + t.compute_input
        compute_start = queue_start + t.queued
        phases = [("queue", queue_start, compute_start)]
        if llm and t.first_token is not None:
            phases += [("prefill", compute_start, t.first_token), ("decode", t.first_token, end)]
        else:
            phases.append(("compute", compute_start, end))
        for name, a, b in phases:
            TRACER.start_span(name, context=context, start_time=ns(a)).end(end_time=ns(max(a, b)))
        span.end(end_time=ns(end))


def _attributes(t: Trace, op: str, llm: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": op, "gen_ai.provider.name": "conch",
                                  "gen_ai.request.model": t.model, "gen_ai.response.model": t.model,
                                  "conch.model.version": t.version}
    if llm:
        params = t.request.params
        attributes.update({"gen_ai.usage.input_tokens": t.prompt_tokens,
                           "gen_ai.usage.output_tokens": t.completion_tokens,
                           "gen_ai.usage.cache_read.input_tokens": t.cached_tokens,
                           "gen_ai.response.finish_reasons": list(t.finish_reasons),
                           "gen_ai.request.max_tokens": params.max_tokens,
                           "gen_ai.request.temperature": params.temperature,
                           "gen_ai.request.top_p": params.top_p})
    if t.cache_hit is not None:
        attributes["conch.response_cache.hit"] = t.cache_hit
    if t.batch_size:
        attributes["conch.batch_size"] = t.batch_size
    return {k: v for k, v in attributes.items() if v is not None}


def grpc_interceptor() -> Any:
    """The gRPC face's SERVER spans: `traceparent` read from the call's metadata, the span's own sent back in
    the initial metadata."""
    import grpc

    class GrpcTraceContext(grpc.aio.ServerInterceptor):
        async def intercept_service(self, continuation, details):
            handler = await continuation(details)
            if handler is None or not (handler.unary_unary or handler.stream_stream):
                return handler
            carrier = {k: v for k, v in details.invocation_metadata or () if isinstance(v, str)}
            name = f"grpc {details.method.rsplit('/', 1)[-1]}"
            attributes = {"rpc.system": "grpc", "rpc.method": details.method}

            def started(context):
                return TRACER.start_as_current_span(name, context=propagate.extract(carrier), kind=SpanKind.SERVER,
                                                    attributes=attributes)

            async def announce(context) -> None:
                out: dict[str, str] = {}
                propagate.inject(out)
                if out:
                    await context.send_initial_metadata(tuple(out.items()))

            if handler.unary_unary:
                inner = handler.unary_unary

                async def unary(request, context):
                    with started(context):
                        await announce(context)
                        return await inner(request, context)
                return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer,
                                                           handler.response_serializer)
            streamed = handler.stream_stream

            async def stream(requests, context):
                with started(context):
                    await announce(context)
                    async for response in streamed(requests, context):
                        yield response
            return grpc.stream_stream_rpc_method_handler(stream, handler.request_deserializer,
                                                         handler.response_serializer)
    return GrpcTraceContext()

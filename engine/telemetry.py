"""OpenTelemetry spans from inside the engine and the agents, through the API alone: every call here is a no-op
until the gateway installs the SDK (`--trace-config mode=opentelemetry`, gateway/telemetry). Attributes follow
the GenAI semantic conventions; no prompt, completion, tool argument or secret is ever put on a span."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import propagate, trace

TRACER = trace.get_tracer("conch")


def wall_ns(monotonic_s: float) -> int:
    """A time.monotonic() reading as the epoch nanoseconds a span takes."""
    return time.time_ns() - int((time.monotonic() - monotonic_s) * 1e9)


@contextmanager
def span(name: str, attributes: dict[str, Any] | None = None,
         kind: trace.SpanKind = trace.SpanKind.INTERNAL) -> Iterator[trace.Span]:
    """A child of the current span, current while the block runs (for plain coroutines, not generators)."""
    with TRACER.start_as_current_span(name, kind=kind, attributes=_clean(attributes)) as current:
        yield current


def detached(name: str, attributes: dict[str, Any] | None = None,
             kind: trace.SpanKind = trace.SpanKind.CLIENT) -> trace.Span:
    """A child of the current span that is never made current (safe across an async generator's yields);
    the caller ends it."""
    return TRACER.start_span(name, kind=kind, attributes=_clean(attributes))


def traceparent_headers(of: trace.Span | None = None) -> dict[str, str]:
    """W3C `traceparent` (and `tracestate`) naming `of` (default: the current span), for an outgoing call."""
    carrier: dict[str, str] = {}
    context = trace.set_span_in_context(of) if of is not None else None
    propagate.inject(carrier, context=context)
    return carrier


def _clean(attributes: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


__all__ = ["TRACER", "detached", "span", "traceparent_headers", "wall_ns"]

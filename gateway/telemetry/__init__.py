"""Tracing: Triton's `--trace-config` (config.py) and its OpenTelemetry mode (otel.py; the [otel] extra)."""
from conch.gateway.telemetry.config import TraceConfig

__all__ = ["TraceConfig"]

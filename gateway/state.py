"""What the HTTP app holds: the engine and the server's settings."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import HTTPConnection

from conch.agents.mcp import McpConfig
from conch.engine.engine import Engine
from conch.gateway.records import RecordStore
from conch.gateway.aliases import ModelAliases
from conch.gateway.conversation.images import ImagePolicy
from conch.gateway.telemetry import TraceConfig

KEEP_ALIVE_S = 90   # idle keep-alive seconds (Ray Serve's proxy's): past httpx's and the OpenAI SDK's 5 s pool expiry


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16 * 1024 * 1024
    metrics_port: int | None = None     # /metrics without a key on this port (None: only on the API port)
    metrics_host: str = "127.0.0.1"
    trace_file: Path | None = None      # where Triton's trace extension writes (--trace-file); None: no traces
    trace_config: TraceConfig = field(default_factory=TraceConfig)   # --trace-config (mode=opentelemetry: OTLP)
    mcp: McpConfig = field(default_factory=McpConfig)    # MCP servers, allowed origins, limits (--mcp-*)
    images: ImagePolicy = field(default_factory=ImagePolicy)   # where image URLs are fetched from (--image-*)
    aliases: ModelAliases = field(default_factory=ModelAliases)    # claude-* -> a served model (gateway/aliases.py)
    keep_billing_header: bool = False   # /v1/messages: render Claude Code's volatile billing line (docs/anthropic.md)
    hosted_tools: str = "drop"          # /v1/responses: hosted tools dropped (named back) or refused
    extra: dict = field(default_factory=dict)


@dataclass
class ConchState:
    engine: Engine
    settings: Settings
    records: RecordStore = field(default_factory=RecordStore)   # stored responses and conversations


def conch_state(request: HTTPConnection) -> ConchState:
    return request.app.state.conch


def wants_cache(request: HTTPConnection, flag: bool = True) -> bool:
    """The client's opt-out of the response cache: the body's `cache: false` or `Cache-Control: no-cache`."""
    return flag and "no-cache" not in request.headers.get("cache-control", "")

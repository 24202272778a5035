"""The MCP library's messages: a server to reach, the tools it offers, what a call gave back, and its failures.

Headers live only in a `ServerTarget` built for one request (or read from the environment at connect time for
a registered server); nothing here that is stored, echoed or logged holds them: `ServerTarget.__repr__` leaves
them out, and a failure's reason is built from the exception's type and message, never from a request.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping


class Transport(str, Enum):
    STREAMABLE_HTTP = "streamable_http"
    SSE = "sse"                  # older servers: GET an event stream, POST messages
    STDIO = "stdio"              # admin-registered only: a command Conch starts


class FailureKind(str, Enum):
    """Why an MCP step failed; the metric's `outcome` label and the start of the reason a client sees."""

    REFUSED = "refused"          # policy: the URL, the key or the tool is not allowed (never reached the server)
    UNREACHABLE = "unreachable"  # connect failed, the server went away, or an HTTP error status
    TIMEOUT = "timeout"          # the call (or the loop) ran out of time
    TOOL_ERROR = "tool_error"    # the server answered with an error result (`isError`) or a JSON-RPC error
    PROTOCOL = "protocol"        # an answer that is not MCP: malformed JSON-RPC, a result that does not validate


class McpFailure(Exception):
    """A failed MCP step with a reason fit to show the client and the model (no headers, no secrets)."""

    def __init__(self, kind: FailureKind, reason: str) -> None:
        super().__init__(f"{kind.value}: {reason}")
        self.kind, self.reason = kind, reason

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class ServerTarget:
    """One MCP server as this request reaches it. `label` names it to the model, items and metrics."""

    label: str
    transport: Transport
    url: str | None = None                       # HTTP transports
    command: tuple[str, ...] = ()                # stdio: argv
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, hash=False)
    metric_name: str = ""                        # bounded label for metrics: a registered label or an origin
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, hash=False)   # stdio only

    def __post_init__(self) -> None:
        if (self.transport is Transport.STDIO) != bool(self.command) or \
                (self.transport is not Transport.STDIO) != bool(self.url):
            raise ValueError(f"MCP server {self.label!r}: stdio takes a command, HTTP transports a url")
        if not self.metric_name:
            object.__setattr__(self, "metric_name", self.label)


@dataclass(frozen=True)
class McpTool:
    """A tool as the server listed it; `input_schema` is the JSON schema of its arguments."""

    server_label: str
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    annotations: Mapping[str, Any] | None = None

    def as_function(self) -> dict:
        """The tool as an OpenAI function tool (chat's shape), for the tool plan and its grammar."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.input_schema)}}


@dataclass(frozen=True)
class CallOutput:
    """A successful call's output as text for the model; `truncated` when the byte bound cut it."""

    text: str
    truncated: bool = False


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one request makes the gateway do for it."""

    connect_timeout_s: float = 10.0       # open a session and list its tools
    call_timeout_s: float = 30.0          # one tools/call
    loop_timeout_s: float = 120.0         # every call and model turn of one loop together
    max_output_bytes: int = 64 * 1024     # one call's output as the model sees it (UTF-8 bytes)
    close_timeout_s: float = 2.0          # closing a session never holds the request longer than this
    max_turns: int = 16                   # model turns in one loop, whatever max_tool_calls says

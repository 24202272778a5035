"""A session with one MCP server: open it, list its tools, call one. Every failure is an `McpFailure`.

    async with open_session(target, limits) as session:
        tools = await session.list_tools()
        output = await session.call("add", {"a": 1, "b": 2})     # CallOutput, or raises McpFailure

Invariants: every await on the server is under a timeout (connect+list: `connect_timeout_s`, a call:
`call_timeout_s` or less when the caller passes a deadline), so nothing hangs; closing is bounded by
`close_timeout_s`; a caller that is cancelled cancels the call in flight (the session's tasks are the
caller's children). Redirects are followed only within the endpoint's origin (the mcp package's transports
refuse the others), so a server cannot bounce Conch to a host the policy never saw. Headers go into the HTTP
client of this session only.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from pydantic import ValidationError

from conch.agents.mcp.metrics import CallObserver
from conch.engine.telemetry import span
from conch.agents.mcp.output import bounded, render_content
from conch.agents.mcp.types import CallOutput, FailureKind, Limits, McpFailure, McpTool, ServerTarget, Transport

if TYPE_CHECKING:        # the mcp package is imported by the first session (its models take ~0.5 s to import,
    from mcp import Client, MCPError     # which a server that runs no MCP tool never pays)

log = logging.getLogger(__name__)

_READ_SLACK_S = 5.0
DEFAULT_LIMITS = Limits()


class McpSession:
    def __init__(self, target: ServerTarget, client: Client, limits: Limits,
                 observer: CallObserver | None = None) -> None:
        self.target, self.client, self.limits, self.observer = target, client, limits, observer

    async def list_tools(self) -> list[McpTool]:
        tools, cursor = [], None
        with _failures("tools/list", self.limits.connect_timeout_s):
            for _ in range(32):                           # pages: a server cannot keep Conch listing forever
                page = await self.client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += [McpTool(self.target.label, t.name, t.description or "", t.input_schema,
                                  t.annotations.model_dump(exclude_none=True) if t.annotations else None)
                          for t in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
        return tools

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float | None = None) -> CallOutput:
        """The tool's output (bounded); an error result, a timeout or a broken answer raises McpFailure."""
        timeout = min(self.limits.call_timeout_s, timeout_s if timeout_s is not None else float("inf"))
        start, outcome = time.monotonic(), "ok"
        try:
            with _failures(f"tools/call {name}", timeout), span(f"execute_tool {name}", {
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "mcp",
                    "mcp.method.name": "tools/call", "mcp.server.label": self.target.label}) as current:
                result = await self.client.call_tool(name, arguments, read_timeout_seconds=timeout)
                if result.is_error:
                    current.set_attribute("error.type", "tool_error")
            text = render_content(result.content, result.structured_content)
            if result.is_error:
                raise McpFailure(FailureKind.TOOL_ERROR, bounded(text or "the tool failed",
                                                                 self.limits.max_output_bytes).text)
            return bounded(text, self.limits.max_output_bytes)
        except McpFailure as failure:
            outcome = failure.kind.value
            raise
        except BaseException:
            outcome = "cancelled"
            raise
        finally:
            if self.observer is not None:
                self.observer.on_mcp_call(self.target.metric_name, name, outcome, time.monotonic() - start)


@asynccontextmanager
async def open_session(target: ServerTarget, limits: Limits = DEFAULT_LIMITS,
                       observer: CallObserver | None = None) -> AsyncIterator[McpSession]:
    """A connected session (the handshake done within `connect_timeout_s`), closed within `close_timeout_s`
    when the caller's body ends normally. One cancel scope spans the whole session because the client's task
    groups, entered at connect, must exit inside every scope they were entered in; its deadline is the
    step's: connect, then none while the caller works (each call has its own), then close."""
    connected = closing = False
    body_error: BaseException | None = None          # the caller's own: it leaves as it came, never relabelled
    with anyio.CancelScope(deadline=anyio.current_time() + limits.connect_timeout_s) as scope:
        try:
            async with AsyncExitStack() as stack:
                from mcp import Client

                transport = await _transport(target, limits, stack)
                client = await stack.enter_async_context(
                    Client(transport, cache=None, read_timeout_seconds=limits.call_timeout_s))
                connected, scope.deadline = True, math.inf
                try:
                    yield McpSession(target, client, limits, observer)
                except BaseException as exc:
                    body_error = exc
                    raise
                scope.deadline, closing = anyio.current_time() + limits.close_timeout_s, True
        except McpFailure:
            raise
        except Exception as exc:
            if body_error is not None and _holds(exc, body_error):
                raise body_error from body_error.__cause__
            if not closing:
                raise classify("connect" if not connected else "session", exc) from None
            log.debug("closing an MCP session: %s", type(exc).__name__)   # the caller's work is done
    if scope.cancelled_caught and not connected:
        raise McpFailure(FailureKind.TIMEOUT, f"connect took longer than {limits.connect_timeout_s:g} s")


def _holds(exc: BaseException, target: BaseException) -> bool:
    """Whether `exc` is `target` or an exception group (a task group's) around it."""
    if exc is target:
        return True
    return isinstance(exc, BaseExceptionGroup) and any(_holds(e, target) for e in exc.exceptions)


async def _transport(target: ServerTarget, limits: Limits, stack: AsyncExitStack) -> Any:
    from mcp import StdioServerParameters
    from mcp.client.sse import sse_client
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if target.transport is Transport.STDIO:
        return stdio_client(StdioServerParameters(command=target.command[0], args=list(target.command[1:]),
                                                  env=dict(target.env) or None))
    if target.transport is Transport.SSE:
        return sse_client(target.url or "", headers=dict(target.headers), timeout=limits.connect_timeout_s,
                          sse_read_timeout=limits.loop_timeout_s + _READ_SLACK_S)
    # reads outlast a call's own deadline, so a slow tool times out as that call, not as the whole session
    timeout = httpx2.Timeout(limits.connect_timeout_s, read=limits.call_timeout_s + _READ_SLACK_S)
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(target.headers), timeout=timeout))
    return streamable_http_client(target.url or "", http_client=http)


@contextmanager
def _failures(step: str, timeout_s: float) -> Iterator[None]:
    """A timeout around one step, and every exception it raises turned into an McpFailure with a reason
    (a cancellation is not an exception here: it propagates as it came)."""
    try:
        with anyio.fail_after(timeout_s):
            yield
    except McpFailure:
        raise
    except TimeoutError:
        raise McpFailure(FailureKind.TIMEOUT, f"{step} took longer than {timeout_s:g} s") from None
    except Exception as exc:
        raise classify(step, exc) from None


def classify(step: str, exc: BaseException) -> McpFailure:
    """The typed failure for an exception out of the mcp package (task groups wrap them in groups)."""
    from mcp import MCPError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpFailure):
        return exc
    if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
        return McpFailure(FailureKind.TIMEOUT, f"{step} timed out")
    if isinstance(exc, MCPError):
        return _rpc_failure(step, exc)
    if isinstance(exc, (ValidationError, ValueError, KeyError, TypeError)):
        return McpFailure(FailureKind.PROTOCOL, f"{step}: the server's answer is not valid MCP "
                                                f"({type(exc).__name__})")
    if isinstance(exc, httpx2.HTTPStatusError):
        return McpFailure(FailureKind.UNREACHABLE, f"{step}: HTTP {exc.response.status_code}")
    if isinstance(exc, (httpx2.HTTPError, OSError)):
        return McpFailure(FailureKind.UNREACHABLE, f"{step}: {type(exc).__name__}: {_short(str(exc))}")
    return McpFailure(FailureKind.PROTOCOL, f"{step}: {type(exc).__name__}: {_short(str(exc))}")


def _rpc_failure(step: str, exc: MCPError) -> McpFailure:
    """A JSON-RPC error: the server's own (a tool error) or one the transport made up for a broken answer."""
    from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, PARSE_ERROR

    message = _short(exc.error.message)
    if message.startswith("Redirect to"):
        return McpFailure(FailureKind.REFUSED, f"{step}: {message}")
    kind = {PARSE_ERROR: FailureKind.PROTOCOL, INVALID_REQUEST: FailureKind.PROTOCOL,
            CONNECTION_CLOSED: FailureKind.UNREACHABLE}.get(exc.error.code, FailureKind.TOOL_ERROR)
    return McpFailure(kind, f"{step}: {message} (JSON-RPC {exc.error.code})")


def _short(text: str, limit: int = 300) -> str:
    """A reason's first line, bounded: the server's error text reaches the client and the model."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."

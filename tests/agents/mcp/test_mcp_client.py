"""agents/mcp/client.py against real MCP servers on loopback: every transport, the output bound, and every
failure typed (down, hanging, an error result, malformed JSON-RPC, a redirect off the origin), never a hang."""
from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from conch.agents.mcp.client import open_session
from conch.agents.mcp.output import bounded
from conch.agents.mcp.types import FailureKind, Limits, McpFailure, ServerTarget, Transport
from tests.mcp_servers import free_port, stdio_command

FAST = Limits(connect_timeout_s=10, call_timeout_s=10, max_output_bytes=2048)
HASTY = Limits(call_timeout_s=1.5)
SECRET = "Bearer sk-mcp-secret-7f3a9c"


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def on_mcp_call(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        assert seconds >= 0
        self.seen.append((server, tool, outcome))


def http(url: str, **kw) -> ServerTarget:
    return ServerTarget("t", Transport.STREAMABLE_HTTP, url=url, **kw)


async def call(target: ServerTarget, tool: str, args: dict, limits: Limits = FAST, observer=None):
    async with open_session(target, limits, observer) as session:
        return await session.call(tool, args)


async def failure(target: ServerTarget, tool: str = "add", args: dict | None = None) -> McpFailure:
    with pytest.raises(McpFailure) as raised:
        await asyncio.wait_for(call(target, tool, args or {}), 30)     # wait_for: a hang fails, not blocks
    return raised.value


@pytest.mark.parametrize("transport", ["http", "sse", "stdio"])
async def test_list_and_call_over_every_transport(transport, tools_http, tools_sse):
    target = {"http": http(tools_http.url),
              "sse": ServerTarget("t", Transport.SSE, url=tools_sse.url),
              "stdio": ServerTarget("t", Transport.STDIO, command=tuple(stdio_command()))}[transport]
    async with open_session(target, FAST) as session:
        tools = {t.name: t for t in await session.list_tools()}
        assert {"add", "lookup"} <= set(tools)
        assert tools["add"].input_schema["required"] == ["a", "b"]
        assert tools["add"].as_function()["function"]["name"] == "add"
        assert (await session.call("add", {"a": 2, "b": 40})).text == "42"
        assert (await session.call("lookup", {"city": "Lima"})).text == "Peru"


async def test_headers_reach_the_server(tools_http):
    out = await call(http(tools_http.url, headers={"Authorization": SECRET}), "whoami", {})
    assert out.text == SECRET
    assert SECRET not in repr(http(tools_http.url, headers={"Authorization": SECRET}))


async def test_headers_never_reach_a_log_line(tools_http, tools_sse, caplog):
    """Every logger at DEBUG (Conch's, the mcp SDK's, httpx2's) over both HTTP transports, a failing call too."""
    caplog.set_level(logging.DEBUG)
    observer = Calls()
    headers = {"Authorization": SECRET, "X-Api-Key": SECRET}
    for target in (http(tools_http.url, headers=headers),
                   ServerTarget("t", Transport.SSE, url=tools_sse.url, headers=headers)):
        assert (await call(target, "add", {"a": 1, "b": 1}, observer=observer)).text == "2"
        with pytest.raises(McpFailure):
            await call(target, "add", {"a": "x"}, observer=observer)
    assert len(caplog.records) > 10, "the drill must capture the mcp and httpx loggers' lines"
    assert all("sk-mcp-secret" not in r.getMessage() and "sk-mcp-secret" not in caplog.text
               for r in caplog.records)
    assert "sk-mcp-secret" not in str(observer.seen)


async def test_output_is_bounded_with_a_note(tools_http):
    out = await call(http(tools_http.url), "lookup", {"city": "big"})
    assert out.truncated and len(out.text.encode()) <= FAST.max_output_bytes
    assert out.text.startswith("xxx") and "truncated by the gateway" in out.text and "of 100000 bytes" in out.text


def test_bound_never_splits_a_character():
    out = bounded("é" * 1000, 200)
    assert out.truncated and len(out.text.encode()) <= 200
    out.text.encode().decode()        # valid UTF-8


async def test_server_down_is_unreachable():
    f = await failure(http(f"http://127.0.0.1:{free_port()}/mcp"))
    assert f.kind is FailureKind.UNREACHABLE and f.message.startswith("unreachable: connect")


async def test_hanging_call_times_out_and_is_counted(hanging):
    observer = Calls()
    with pytest.raises(McpFailure) as raised:
        await asyncio.wait_for(call(http(hanging.url), "wait", {}, HASTY, observer), 30)
    assert raised.value.kind is FailureKind.TIMEOUT and "tools/call wait" in raised.value.reason
    assert observer.seen == [("t", "wait", "timeout")]


async def test_hanging_connect_times_out(hanging):
    slow = ServerTarget("t", Transport.STDIO, command=(sys.executable, "-c", "import time; time.sleep(60)"))
    with pytest.raises(McpFailure) as raised:
        async with open_session(slow, Limits(connect_timeout_s=1)):
            pass
    assert raised.value.kind in (FailureKind.TIMEOUT, FailureKind.UNREACHABLE)


@pytest.mark.parametrize("tool, reason", [("explode", "Error executing tool explode"),
                                          ("refuse", "not allowed today"), ("nope", "Unknown tool")])
async def test_error_results(failing, tool, reason):
    observer = Calls()
    with pytest.raises(McpFailure) as raised:
        await call(http(failing.url), tool, {}, observer=observer)
    assert raised.value.kind is FailureKind.TOOL_ERROR and reason in raised.value.reason
    assert observer.seen == [("t", tool, "tool_error")]


@pytest.mark.parametrize("path", ["/malformed", "/garbage"])
async def test_malformed_json_rpc_is_a_protocol_failure(rogue, path):
    f = await failure(http(rogue.url + path))
    assert f.kind is FailureKind.PROTOCOL


async def test_redirect_to_another_origin_is_not_followed(rogue):
    f = await failure(http(rogue.url + "/redirect"))
    assert f.kind is FailureKind.REFUSED and "not followed" in f.reason


async def test_cancelling_the_caller_cancels_the_call(hanging):
    observer = Calls()

    async def scenario() -> None:
        async with open_session(http(hanging.url), Limits(call_timeout_s=600), observer) as session:
            task = asyncio.create_task(session.call("wait", {}))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    await asyncio.wait_for(scenario(), 30)       # the call and the session end at once, not after 600 s
    assert observer.seen == [("t", "wait", "cancelled")]

"""The test MCP servers (tests/mcp_servers/), each started once per test module on loopback."""
from __future__ import annotations

import pytest

from tests.mcp_servers import McpProcess, start


def _serve(*args: str, **kw) -> McpProcess:
    server = start(*args, **kw)
    return server


@pytest.fixture(scope="module")
def tools_http():
    server = _serve("tools_server", "streamable-http")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tools_sse():
    server = _serve("tools_server", "sse", path="/sse")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hanging():
    server = _serve("hang_server")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def failing():
    server = _serve("error_server")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rogue(tools_http):
    """Redirects to the tools server under another origin (`localhost` in place of 127.0.0.1)."""
    server = _serve("rogue_server", tools_http.url.replace("127.0.0.1", "localhost"), path="")
    yield server
    server.stop()

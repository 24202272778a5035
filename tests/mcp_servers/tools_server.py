"""The test MCP server with two tools, `add` and `lookup`, over any transport.

    python -m tests.mcp_servers.tools_server streamable-http PORT
    python -m tests.mcp_servers.tools_server sse PORT
    python -m tests.mcp_servers.tools_server stdio

`lookup` answers from a fixed table; `lookup("big")` returns 100 kB, to drill the client's output bound.
`whoami` returns the Authorization header it was sent (HTTP only), so a test can see headers arrive.
"""
from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer

TABLE = {"paris": "France", "tokyo": "Japan", "lima": "Peru", "big": "x" * 100_000}

server = MCPServer("conch-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def lookup(city: str) -> str:
    """The country a city is in."""
    return TABLE.get(city.lower(), "unknown")


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header this call arrived with."""
    request = ctx.request_context.request
    return request.headers.get("authorization", "none") if request is not None else "none"


def main(argv: list[str]) -> None:
    transport = argv[0]
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run(transport, host="127.0.0.1", port=int(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])

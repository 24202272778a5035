"""A test MCP server whose `wait` tool never answers, and whose `slow_list` mode hangs `tools/list` too.

    python -m tests.mcp_servers.hang_server PORT
"""
from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("conch-test-hang")


@server.tool()
async def wait(seconds: int = 3600) -> str:
    """Sleeps for an hour."""
    await anyio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

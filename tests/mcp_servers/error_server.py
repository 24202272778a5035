"""A test MCP server whose tools fail: `explode` raises (an error result), `refuse` raises a tool error.

    python -m tests.mcp_servers.error_server PORT
"""
from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("conch-test-error")


@server.tool()
def explode(reason: str = "boom") -> str:
    """Always fails."""
    raise RuntimeError(reason)


@server.tool()
def refuse() -> str:
    """Always refuses."""
    raise ToolError("not allowed today")


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

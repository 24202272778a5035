"""A test MCP server that lists, beside a plain `add`, tools whose input schemas the gateway cannot serve as a
grammar: `match` takes a string whose pattern uses look-around (refused when the schema is checked), `stop`
takes a string whose only value is a special token's text (it compiles, but no generation can write it).

    python -m tests.mcp_servers.unservable_server PORT
"""
from __future__ import annotations

import sys
from typing import Annotated, Literal

from pydantic import Field

from mcp.server.mcpserver import MCPServer

server = MCPServer("conch-test-unservable")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def match(text: Annotated[str, Field(json_schema_extra={"pattern": r"^(?=x)x+$"})]) -> str:
    """Echoes a run of x's (its pattern has a look-ahead)."""
    return text


@server.tool()
def stop(word: Literal["<|im_end|>"]) -> str:
    """Takes a special token's text as its only value."""
    return word


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

"""A plain HTTP server that is not a well-behaved MCP server, for the client's failure drills.

    python -m tests.mcp_servers.rogue_server TARGET PORT

POST /redirect   307 to TARGET (another origin: the client must not follow it)
POST /malformed  200 with a JSON body that is not JSON-RPC
POST /garbage    200 `application/json` that is not JSON at all
"""
from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


def build(target: str) -> Starlette:
    async def redirect(request: Request) -> Response:
        return RedirectResponse(target, status_code=307)

    async def malformed(request: Request) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "surprise": True})

    async def garbage(request: Request) -> Response:
        return Response(b"{not json", media_type="application/json")

    return Starlette(routes=[Route("/redirect", redirect, methods=["GET", "POST", "DELETE"]),
                             Route("/malformed", malformed, methods=["GET", "POST", "DELETE"]),
                             Route("/garbage", garbage, methods=["GET", "POST", "DELETE"])])


if __name__ == "__main__":
    uvicorn.run(build(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")

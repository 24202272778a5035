"""/v1 bodies are JSON whatever the Content-Type says (OpenAI's API and `curl -d`, which sends
application/x-www-form-urlencoded, agree on that), as /v2 already reads them."""
from __future__ import annotations

from typing import Callable

from fastapi import Request, Response
from fastapi.routing import APIRoute

_JSON = b"application/json"


class JSONBodyRoute(APIRoute):
    """An APIRoute that hands FastAPI its request with `content-type: application/json`, so the body is parsed
    (and, if it is not JSON, refused) as JSON."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def as_json(request: Request) -> Response:
            if request.headers.get("content-type", "").split(";")[0].strip().lower() != _JSON.decode():
                headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-type"]
                request = Request({**request.scope, "headers": [*headers, (b"content-type", _JSON)]},
                                  request.receive)
            return await handler(request)

        return as_json

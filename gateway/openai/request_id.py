"""`x-request-id` on every answer of the OpenAI face (/v1/... but /v1/messages, whose face sends Anthropic's
`request-id`), errors included: what the OpenAI SDKs read into `_request_id` and a client quotes in a report.
The id is a fresh `req_` + 32 hex digits, named in no log line of Conch's own."""
from __future__ import annotations

import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
_ANTHROPIC = "/v1/messages"


class RequestIdHeader:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/v1/") or path.startswith(_ANTHROPIC):
            await self.app(scope, receive, send)
            return
        request_id = f"req_{uuid.uuid4().hex}".encode()

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == HEADER for name, _ in headers):
                    headers.append((HEADER, request_id))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_id)

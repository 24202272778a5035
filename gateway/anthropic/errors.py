"""Anthropic's error shape for every error on /v1/messages and below, wherever it is raised (the key check, the
body guard, pydantic, a 404 or 405, the route, a stream that has started):

    {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}   + a `request-id` header

The error type follows the status, as Anthropic's API (and its SDK's exception classes) read it."""
from __future__ import annotations

import uuid

from conch.gateway.errors import APIError, ErrorFace, register_face, to_api_error
from conch.gateway.streaming import sse_named

PREFIX = "/v1/messages"

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
          503: "overloaded_error"}


def error_type(status: int) -> str:
    """A status no row names is a request error below 500, an API error from 500 on."""
    return _TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def anthropic_body(err: APIError) -> dict:
    return {"type": "error", "error": {"type": error_type(err.status), "message": err.message}}


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def request_id_header() -> dict:
    return {"request-id": new_request_id()}


def error_event(error: str | Exception) -> str:
    """The `error` event of a stream that has started (an engine's error message, or an exception mapped as a
    response's would be); the stream closes after it."""
    err = APIError(500, error) if isinstance(error, str) else to_api_error(error)
    return sse_named("error", anthropic_body(err))


register_face(PREFIX, ErrorFace(anthropic_body, request_id_header))

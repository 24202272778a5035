"""Every failure becomes the right status with the face's error body.

The body is the face's, chosen by the request path's longest registered prefix (`register_face`): /v1
answers OpenAI's {"error": {"message", "type", "param", "code"}}, a face registered under a longer prefix
(/v1/messages: Anthropic's) its own; a path no face claims answers {"error": "..."} (/v2, KServe's).
One table (`ERRORS`) maps exception classes to statuses; each face's error type and the gRPC status code
derive from the status. Nothing below the gateway knows HTTP.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conch.agents import ChatTemplateError
from conch.engine import errors as engine_errors
from conch.grammars import GrammarError

log = logging.getLogger(__name__)


class ParamError(ValueError):
    """A value error that names its parameter (the request field path); wire schemas raise it in validators."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


class ClientDisconnected(Exception):
    """The client went away before the response started (gateway/streaming.py's until_disconnect)."""


class APIError(Exception):
    """A failure as the faces answer it: a status, a message, the parameter it names and OpenAI's `code`.
    `type` is OpenAI's error type, derived from the status (`openai_type`) unless given (a rate limit names the
    limit, "requests" or "tokens", as OpenAI's does)."""

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 code: str | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type or openai_type(status)
        self.headers = headers or {}


@dataclass(frozen=True)
class ErrorKind:
    status: int
    code: str | None = None     # OpenAI's machine-readable `code`; None: the exception's own, if it has one


# The one error table: every exception a face may meet -> its status. Each face's error type (OpenAI's below,
# Anthropic's in anthropic/errors.py) and the gRPC status code (grpc/convert.py) derive from the status; a
# layer's own errors join with `register_error` (auth, records).
ERRORS: dict[type[Exception], ErrorKind] = {
    engine_errors.InvalidRequest: ErrorKind(400),
    engine_errors.ContextLengthExceeded: ErrorKind(400, "context_length_exceeded"),
    engine_errors.ModelNotFound: ErrorKind(404, "model_not_found"),
    engine_errors.ModelNotReady: ErrorKind(503, "model_not_ready"),
    engine_errors.Overloaded: ErrorKind(503, "overloaded"),
    engine_errors.BackendUnavailable: ErrorKind(503, "backend_unavailable"),
    engine_errors.ModelCodeFailed: ErrorKind(400, "model_load_failed"),     # the model's own code or files
    engine_errors.InferenceError: ErrorKind(500),
    engine_errors.UpstreamError: ErrorKind(502, "bad_gateway"),
    engine_errors.UpstreamTimeout: ErrorKind(504, "gateway_timeout"),
    engine_errors.UpstreamRateLimited: ErrorKind(429, "upstream_rate_limited"),
    ChatTemplateError: ErrorKind(400),
    ParamError: ErrorKind(400),
    GrammarError: ErrorKind(400, "invalid_grammar"),
    # nginx's 499: nobody reads it, but a hang-up is handled here instead of surfacing as a server error
    ClientDisconnected: ErrorKind(499),
}

# OpenAI's error `type` by status; a status no row names is a request error below 500, an internal one above.
_OPENAI_TYPES = {401: "invalid_request_error", 403: "permission_error", 429: "rate_limit_exceeded",
                 499: "client_closed_request", 500: "internal_error", 502: "upstream_error",
                 503: "service_unavailable", 504: "upstream_error", 507: "invalid_request_error"}


def openai_type(status: int) -> str:
    return _OPENAI_TYPES.get(status) or ("invalid_request_error" if status < 500 else "internal_error")


def register_error(cls: type[Exception], status: int, code: str | None = None) -> None:
    ERRORS[cls] = ErrorKind(status, code)


def to_api_error(exc: Exception) -> APIError:
    if isinstance(exc, APIError):
        return exc
    for cls in type(exc).__mro__:
        kind = ERRORS.get(cls)
        if kind is not None:
            retry = kind.status in (429, 503)
            headers = {"Retry-After": str(max(1, round(getattr(exc, "retry_after", 1))))} if retry else None
            return APIError(kind.status, getattr(exc, "message", str(exc)), param=getattr(exc, "param", None),
                            code=kind.code or getattr(exc, "code", None), headers=headers)
    return APIError(500, f"internal error: {exc}")


_PATH = re.compile(r"(?<![\w:/.])/(?:[^\s'\"/:,;()]+/)*[^\s'\"/:,;()]*")
_REASON_CHARS = 300


def public_reason(text: str) -> str:
    """What a client may see of a failure's text: its first line, with server paths replaced, at most 300
    characters (the whole text, traceback included, belongs in the server log)."""
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    short = _PATH.sub("<path>", first)
    return short if len(short) <= _REASON_CHARS else short[:_REASON_CHARS - 3] + "..."


def openai_body(err: APIError) -> dict:
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def kserve_body(err: APIError) -> dict:
    return {"error": err.message}


@dataclass(frozen=True)
class ErrorFace:
    """How one face writes an error: its body, and headers it adds to every error (a request id...)."""

    body: Callable[[APIError], dict]
    headers: Callable[[], dict] | None = None


# path prefix -> face; the longest prefix that is the path or one of its parent folders wins
_FACES: dict[str, ErrorFace] = {"/v1": ErrorFace(openai_body)}
_DEFAULT_FACE = ErrorFace(kserve_body)


def register_face(prefix: str, face: ErrorFace) -> None:
    """Errors on `prefix` and the paths below it are written by `face` (a face module registers at import)."""
    _FACES[prefix.rstrip("/")] = face


def face_of(path: str) -> ErrorFace:
    while path:
        face = _FACES.get(path)
        if face is not None:
            return face
        path = path.rpartition("/")[0]
    return _DEFAULT_FACE


def error_response(request: Request, err: APIError) -> JSONResponse:
    face = face_of(request.url.path.rstrip("/"))
    headers = {**(face.headers() if face.headers is not None else {}), **err.headers}
    return JSONResponse(face.body(err), status_code=err.status, headers=headers)


def _validation_error(exc: RequestValidationError) -> APIError:
    first = exc.errors()[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    # Drop pydantic's union-branch names (e.g. 'str', 'list[TextPart]') from the path.
    path = [p for p in loc if not any(c in p for c in "[]") and p not in ("str", "int", "float", "bool")]
    param = ".".join(path) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return APIError(400, "the request body is not valid JSON", param=None, code="invalid_json")
    if kind == "extra_forbidden":
        return APIError(400, f"Unrecognized request argument supplied: {param}", param=param,
                        code="unsupported_parameter")
    if kind == "missing":
        return APIError(400, f"Missing required parameter: '{param}'", param=param, code="missing_required_parameter")
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ParamError):  # a whole-request check that names its own parameter
        return APIError(400, cause.message, param=cause.param, code="invalid_value")
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if param is None:                  # the body as a whole (not an object, a cross-field rule): no name to give
        return APIError(400, f"Invalid request body: {msg}", param=None, code="invalid_value")
    return APIError(400, f"Invalid value for '{param}': {msg}", param=param, code="invalid_value")


def body_error(exc: ValidationError) -> APIError:
    """A body read outside a route (a WebSocket's event) refused as a route's would be."""
    return _validation_error(RequestValidationError(exc.errors()))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(request, _validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(request, APIError(exc.status_code, str(exc.detail), code=code))

    async def _on_known(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, to_api_error(exc))

    # Known classes get their own handler; anything else reaches CatchAll (a handler for `Exception` would run
    # in Starlette's ServerErrorMiddleware, which re-raises after answering, and uvicorn then drops the
    # keep-alive connection).
    known: tuple[type[Exception], ...] = (APIError, *ERRORS)
    for cls in known:
        app.add_exception_handler(cls, _on_known)


class CatchAll:
    """An exception no handler knows becomes a 500 with the face's error body, on a connection that stays
    usable; its traceback goes to the log, not to the client. Once a response has started it can only be cut
    short, so the exception goes on to the server (which closes the connection)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:
                raise
            log.exception("unexpected error serving %s %s", scope.get("method"), scope.get("path"))
            err = APIError(500, f"internal server error ({type(exc).__name__}); the server log has the details",
                           code="internal_error")
            await error_response(Request(scope), err)(scope, receive, send)

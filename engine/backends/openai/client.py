"""One AsyncOpenAI per deployment (its own connection pool and retry settings), and the upstream's
exceptions as engine errors: 429 -> UpstreamRateLimited (its Retry-After kept), 5xx / connection / broken
stream -> UpstreamError, timeout -> UpstreamTimeout, a request it refused (400, 413, 422) -> InvalidRequest.
A deployment that rejects our key or does not know the model is a configuration fault: UpstreamError."""
from __future__ import annotations

import os

import openai

from conch.engine.errors import EngineError, InvalidRequest, UpstreamError, UpstreamRateLimited, UpstreamTimeout
from conch.engine.repository.upstream import RouteConfig, UpstreamConfig

try:                                   # the HTTP library the openai SDK is built on (httpx2 from openai 3)
    import httpx2 as _http
except ImportError:                    # pragma: no cover - openai < 3
    import httpx as _http  # type: ignore[no-redef]  # the same API under its older name: one binding, two sources

_CONNECT_TIMEOUT = 10.0
_KEEPALIVE_EXPIRY = 4.0                # under uvicorn's (vLLM's) 5 s keep-alive: the pool gives up an idle
                                       # connection before the upstream may close it under a request
_REFUSED = (400, 413, 422)             # the client's request, as the upstream judged it: a 400 here too


def make_client(config: UpstreamConfig, route: RouteConfig, max_connections: int) -> openai.AsyncOpenAI:
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    timeout = _http.Timeout(config.timeout, connect=min(config.timeout, _CONNECT_TIMEOUT))
    pool = _http.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                       keepalive_expiry=_KEEPALIVE_EXPIRY)
    http = openai.DefaultAsyncHttpxClient(timeout=timeout, limits=pool)
    return openai.AsyncOpenAI(api_key=key or "none", base_url=route.base_url, timeout=timeout,
                              max_retries=config.max_retries, http_client=http)


def engine_error(exc: Exception, label: str, config: UpstreamConfig) -> EngineError:
    """The engine error for an exception raised while asking deployment `label`."""
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamTimeout(f"upstream deployment '{label}' did not answer within {config.timeout:g}s")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return UpstreamError(f"upstream deployment '{label}' could not be reached or broke off: "
                             f"{type(cause).__name__}: {cause}")
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, label)
    if isinstance(exc, openai.APIError):          # an error event in the middle of its stream
        return UpstreamError(f"upstream deployment '{label}' failed: {_message(exc)}")
    return UpstreamError(f"upstream deployment '{label}' sent an unreadable answer: {type(exc).__name__}: {exc}")


def _status_error(exc: openai.APIStatusError, label: str) -> EngineError:
    status, message = exc.status_code, _message(exc)
    if status == 429:
        return UpstreamRateLimited(f"upstream deployment '{label}' is rate limited: {message}",
                                   retry_after=_retry_after(exc.response.headers))
    if status in _REFUSED:
        body = exc.body if isinstance(exc.body, dict) else {}
        param = body.get("param") if isinstance(body.get("param"), str) else None
        return InvalidRequest(f"the upstream refused the request: {message}", param=param)
    return UpstreamError(f"upstream deployment '{label}' answered {status}: {message}")


def _message(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return exc.message


def _retry_after(headers) -> float:
    try:
        return max(1.0, float(headers.get("retry-after", "1")))
    except ValueError:                 # an HTTP date: wait the usual second
        return 1.0

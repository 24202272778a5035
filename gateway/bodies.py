"""What every request body passes before a route sees it: a byte limit counted as the body streams in, and a
bound on JSON nesting depth.

`BodyGuard` reads the body itself (every route reads whole bodies anyway), so a chunked upload stops at the
limit instead of being buffered whole: 413, and the connection is closed rather than drained. A body whose
JSON nests deeper than MAX_JSON_DEPTH, or that holds an integer past Python's 4,300-digit limit, is a 400
before any parser sees it. Only a /v2 infer route takes binary tensor data: there a body with
`Inference-Header-Content-Length` has only its JSON header checked; any other route refuses a body sent with
that header, so the JSON a route parses is always the JSON the guard saw. A lone UTF-16 surrogate escape
(`"\\ud800"`) is a 400 too, as OpenAI answers: JSON allows it, but it is no character, and every tokenizer,
UTF-8 encoder and store below would fail on it. So is a bare `NaN`, `Infinity` or `-Infinity` (Python's JSON
reader takes them, JSON has no such numbers): the 400 names the field that holds it, on every route."""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conch.engine.params.json_text import MAX_JSON_DEPTH, json_depth, long_integer
from conch.gateway.errors import APIError, error_response

__all__ = ["MAX_JSON_DEPTH", "BodyGuard", "json_depth", "lone_surrogate", "too_deep"]
BINARY_HEADER = b"inference-header-content-length"
_BINARY_ROUTE = re.compile(r"/v2/models/[^/]+(?:/versions/[^/]+)?/infer")

_OFF_LOOP_BYTES = 1 << 20          # bodies above this are scanned in a worker thread
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
# a \uD800-\uDFFF escape: an odd run of backslashes before the u (an even one is escaped backslashes)
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def lone_surrogate(body: bytes) -> bool:
    """Whether a surrogate escape in `body` is not a high one directly followed by a low one."""
    if not _SURROGATE_HINT.search(body):
        return False
    low_due = None                                         # where a high surrogate's low half must start
    for m in _SURROGATE.finditer(body):
        start, high = m.end() - 6, int(m.group(1), 16) < 0xDC00
        if high and low_due is not None or not high and low_due != start:
            return True
        low_due = m.end() if high else None
    return low_due is not None


_BLANK = b" \t\r\n"


def _bare_constant_hint(body: bytes) -> bool:
    """Whether a NaN or Infinity in `body` stands where a JSON value may start (after `:`, `,`, `[` or at the
    body's start, blanks and a `-` between): the only places a bare one can be. Each word is found by a
    substring search; the few inside a long string (an image's base64 holds some) are dismissed by the byte
    before them, so a 3 MB body costs ~1 ms, not the json.loads below."""
    for word in (b"NaN", b"Infinity"):
        at = body.find(word)
        while at >= 0:
            before = body[max(0, at - 256):at].rstrip(_BLANK)
            if before.endswith(b"-"):
                before = before[:-1].rstrip(_BLANK)
            if not before or before[-1:] in (b":", b",", b"["):
                return True
            at = body.find(word, at + 1)
    return False


class _NonFinite:
    def __init__(self, text: str) -> None:
        self.text = text


def non_finite(body: bytes) -> tuple[str, str] | None:
    """(the dotted path of the first bare NaN / Infinity / -Infinity in `body`, its text), or None (none, or
    the body is no JSON: the route's parser refuses that)."""
    if not _bare_constant_hint(body):
        return None
    try:
        value = json.loads(body, parse_constant=_NonFinite)
    except (ValueError, RecursionError):
        return None
    return _find_non_finite(value, [])


def _find_non_finite(value: Any, path: list[str]) -> tuple[str, str] | None:
    if isinstance(value, _NonFinite):
        return ".".join(path), value.text
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _find_non_finite(child, [*path, str(key)])
        if found is not None:
            return found
    return None


async def _scanned(check: Callable[[bytes], Any], body: bytes) -> Any:
    return await asyncio.to_thread(check, body) if len(body) > _OFF_LOOP_BYTES else check(body)


async def too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    if body.count(b"[") + body.count(b"{") <= limit:      # the common case: too few brackets to nest that deep
        return False
    if len(body) > _OFF_LOOP_BYTES:
        return await asyncio.to_thread(json_depth, body) > limit
    return json_depth(body) > limit


class BodyGuard:
    def __init__(self, app: ASGIApp, limit: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app, self.limit, self.max_depth = app, limit, max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send, self._too_large(f"{int(declared)} bytes"))
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return                                    # the client left before its body was complete
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, send, self._too_large(f"more than {self.limit} bytes"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        err = _binary_header_misplaced(scope["path"], headers, body) or await self._malformed(
            _json_part(scope["path"], body, headers))
        if err is not None:
            await error_response(Request(scope), err)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _malformed(self, json_part: bytes) -> APIError | None:
        if await too_deep(json_part, self.max_depth):
            return APIError(400, f"the request body nests JSON deeper than {self.max_depth} levels",
                            code="invalid_json")
        if await _scanned(long_integer, json_part):
            return APIError(400, "the request body holds a number of more than 4300 digits", code="invalid_json")
        bad = await _scanned(non_finite, json_part)
        if bad is not None:
            where = f"'{bad[0]}'" if bad[0] else "the request body"
            return APIError(400, f"Invalid value for {where}: {bad[1]} is not a JSON number (JSON has no NaN or "
                                 "Infinity)", param=bad[0] or None, code="invalid_value")
        if lone_surrogate(json_part):
            return APIError(400, "the request body holds a lone UTF-16 surrogate escape (such as \\ud800), "
                                 "which is not a character", code="invalid_json")
        return None

    def _too_large(self, what: str) -> APIError:
        return APIError(413, f"request body of {what} exceeds the limit of {self.limit} bytes",
                        code="payload_too_large", headers={"Connection": "close"})

    @staticmethod
    async def _refuse(scope: Scope, send: Send, err: APIError) -> None:
        async def nothing() -> Message:                   # the rest of the body is never read
            return {"type": "http.disconnect"}
        await error_response(Request(scope), err)(scope, nothing, send)


def _binary_header_misplaced(path: str, headers: dict[bytes, bytes], body: bytes) -> APIError | None:
    """A body sent with the header to a route that reads JSON only. A bodiless request passes (tritonclient
    reuses one headers dict, so its GETs after an infer carry the header), and is never split by it."""
    if BINARY_HEADER not in headers or not body or _BINARY_ROUTE.fullmatch(path):
        return None
    return APIError(400, "Inference-Header-Content-Length is accepted only by /v2 infer routes (binary tensor "
                         "data); this route reads a JSON body", code="invalid_header")


def _json_part(path: str, body: bytes, headers: dict[bytes, bytes]) -> bytes:
    """What a route parses as JSON: on an infer route with the header, the header's first bytes."""
    header_length = headers.get(BINARY_HEADER, b"")
    binary = header_length.isdigit() and _BINARY_ROUTE.fullmatch(path) is not None
    return body[:int(header_length)] if binary else body


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body as one message, then the client's own messages (a disconnect, for streaming routes)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()
    return replayed

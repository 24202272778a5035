"""API keys: who may call, which models each key may use, and the check every face runs first.

Keys come from `--api-key KEY` (any model, no limits) and `--api-keys-file FILE` (YAML or JSON):
    keys:
      - key: sk-team-a          # the secret the client sends
        name: team-a            # how logs, limits and metrics name it (default: a hash of the key)
        models: [tiny]          # omitted: every model
        rpm: 60                 # requests per minute; omitted: unlimited
        tpm: 100000             # tokens (prompt + completion) per minute; omitted: unlimited
        admin: true             # may load and unload models (and read /metrics); default false
        metrics: true           # may read /metrics; default false
The file is validated when read (gateway/keys_file.py: types, ranges, unique names and secrets): a bad one
refuses to start, naming the entry; SIGHUP reads it again, and a bad reload keeps the keys in force.
`--admin-key KEY` adds an admin key (every model, no limits). No key configured: the server is open, and
every role is everyone's (what `make run` serves).

Every face calls `Gate.check(authorization, model)`: HTTP passes the `Authorization` header (/v1 and /v2
alike, through the `guard` dependency), or `x-api-key` (the anthropic SDK's header) read as a bearer token
when no Authorization header came; gRPC passes the `authorization` metadata value. The guard checks the model
a body names after its alias is resolved (gateway/aliases.py), so a key's `models` lists served names. It
raises Unauthorized (401), ModelNotFound (404: a model the key may not use is not revealed) or RateLimited (429).
Model control and /metrics also call `Gate.require(authorization, role)`: Forbidden (403) for a key without
the role; with keys configured and no key holding it, that face is refused to everyone. Over HTTP,
`KeyFirst` authenticates from the headers before anything reads the body.
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from conch.engine.errors import ModelNotFound
from conch.gateway.aliases import resolve_model
from conch.gateway.api_key import ApiKey
from conch.gateway.errors import error_response, register_error, to_api_error

log = logging.getLogger(__name__)


class Unauthorized(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = None


class Forbidden(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = None


register_error(Unauthorized, 401, "invalid_api_key")
register_error(Forbidden, 403, "permission_denied")

# The key of the request being served (set by Gate.check); token limits charge usage to it afterwards.
current_key: contextvars.ContextVar["ApiKey | None"] = contextvars.ContextVar("conch_api_key", default=None)


class KeyRing:
    def __init__(self, keys: Sequence[ApiKey] = ()) -> None:
        self._by_digest = {_digest(k.secret): k for k in keys}
        self.source: tuple[tuple[str, ...], Path | None, tuple[str, ...]] = ((), None, ())   # what load read

    @property
    def open(self) -> bool:
        return not self._by_digest

    def __len__(self) -> int:
        return len(self._by_digest)

    def lookup(self, secret: str) -> ApiKey | None:
        return self._by_digest.get(_digest(secret))   # compares digests: no timing leak of the secret

    def any_with(self, role: str) -> bool:
        return any(k.has(role) for k in self._by_digest.values())

    @classmethod
    def load(cls, secrets: Sequence[str] = (), file: Path | None = None, admins: Sequence[str] = ()) -> "KeyRing":
        """The command line's keys and the keys file's (gateway/keys_file.py validates it): KeysFileError (a
        ValueError) naming the entry for a bad file, or for two keys of one name or one secret."""
        from conch.gateway.keys_file import check_unique, read_keys_file

        keys = [ApiKey(s) for s in secrets] + [ApiKey(s, admin=True) for s in admins]
        keys += read_keys_file(file) if file is not None else []
        check_unique(keys)
        ring = cls(keys)
        ring.source = (tuple(secrets), file, tuple(admins))
        return ring

    def reloaded(self) -> "KeyRing":
        """The ring read again from its sources (the keys file may have changed); KeysFileError as load."""
        secrets, file, admins = self.source
        return KeyRing.load(secrets, file, admins)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def may_use(model: str) -> bool:
    """Whether the key of the request being served (None: an open server) may use `model`; listings show only these."""
    key = current_key.get()
    return key is None or key.allows(model)


def bearer(authorization: str | None) -> str | None:
    """The token of `Bearer TOKEN` (the scheme is case-insensitive), or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class Gate:
    """Authentication, the key's models, and its rate limits; `rejections` counts 429s by (model, limit)."""

    def __init__(self, keys: KeyRing | None = None, limiter=None) -> None:
        self.keys = keys or KeyRing()
        self.limiter = limiter                       # gateway.limits.Limiter, or None for no limits
        self.rejections: Counter[tuple[str, str]] = Counter()
        self.unauthorized = 0
        self.on_reload: list[Callable[[KeyRing], None]] = []   # called with the new keys after a reload

    def reload_keys(self) -> bool:
        """Reads the keys again (SIGHUP); a file that is not valid keeps the keys in force, and says why."""
        from conch.gateway.keys_file import KeysFileError

        try:
            self.keys = self.keys.reloaded()
        except KeysFileError as exc:
            log.error("keys file reload refused, the %d keys in force stay: %s", len(self.keys), exc)
            return False
        for listener in self.on_reload:
            listener(self.keys)
        log.info("keys reloaded: %d keys", len(self.keys))
        return True

    def authenticate(self, authorization: str | None) -> ApiKey | None:
        if self.keys.open:
            return None
        token = bearer(authorization)
        key = self.keys.lookup(token) if token else None
        if key is None:
            self.unauthorized += 1
            raise Unauthorized("Incorrect API key provided. You can find your API key in your server's key file."
                               if token else "You didn't provide an API key. You need to provide your API key "
                               "in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY) "
                               "or in an x-api-key header.")
        return key

    def require(self, authorization: str | None, role: str) -> ApiKey | None:
        """The key, if it holds `role` (None on an open server, where everyone does); else 401 or 403."""
        key = self.authenticate(authorization)
        if key is None or key.has(role):
            return key
        if not self.keys.any_with(role):
            raise Forbidden(f"this server has no key with the '{role}' role, so this API is disabled; "
                            f"start it with --admin-key or give a key '{role}: true' in the keys file")
        raise Forbidden(f"this API needs a key with the '{role}' role")

    async def check(self, authorization: str | None, model: str | None = None) -> ApiKey | None:
        key = self.authenticate(authorization)
        current_key.set(key)
        if key is None:
            return None
        if model is not None and not key.allows(model):
            raise ModelNotFound(f"The model '{model}' does not exist", param="model")
        if self.limiter is not None:
            try:
                await self.limiter.charge(key)
            except Exception as exc:
                limit = getattr(exc, "limit", None)
                if limit is not None:
                    self.rejections[(model or "", limit)] += 1
                raise
        return key


def credentials(headers) -> str | None:
    """The request's `Authorization` value; without one, its `x-api-key` as a bearer token. `headers`: any
    mapping of lower-case names to values (Starlette's headers, or a scope's decoded)."""
    authorization = headers.get("authorization")
    if authorization is not None:
        return authorization
    api_key = headers.get("x-api-key")
    return f"Bearer {api_key}" if api_key else None


def require_role(request: Request, role: str) -> None:
    """For a route that needs a role (model control, /metrics): 401 / 403 unless the request's key holds it."""
    gate: Gate | None = getattr(request.app.state, "gate", None)
    if gate is not None:
        gate.require(credentials(request.headers), role)


async def guard(request: Request) -> None:
    """FastAPI dependency for every authenticated route: the model comes from the path or the JSON body."""
    gate: Gate | None = getattr(request.app.state, "gate", None)
    if gate is None:
        return
    model = request.path_params.get("model_name") or request.path_params.get("model")
    if model is None and request.method == "POST":
        model = await _body_model(request)
        model = resolve_model(request, model) if model is not None else None
    await gate.check(credentials(request.headers), model)


async def _body_model(request: Request) -> str | None:
    try:
        body = json.loads(await request.body() or b"null")   # FastAPI has read (and cached) the body already
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def needs_key(path: str) -> bool:
    """The paths behind the guard: /v1/* and /v2/* but GET /v2 and /v2/health/* (what kserve.open_router and
    health.router serve)."""
    return path.startswith("/v1/") or (path.startswith("/v2/") and not path.startswith("/v2/health/"))


def _has_body(scope: Scope) -> bool:
    headers = dict(scope.get("headers", ()))
    return b"transfer-encoding" in headers or headers.get(b"content-length", b"0") not in (b"0", b"")


class KeyFirst:
    """401 from the headers alone, before anything reads the body: an unknown caller never makes the server
    buffer or parse what it sent. The guard then checks the key's models and limits as before."""

    def __init__(self, app: ASGIApp, gate: Gate | None) -> None:
        self.app, self.gate = app, gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.gate is not None and needs_key(scope["path"]):
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())
                       if k in (b"authorization", b"x-api-key")}
            try:
                self.gate.authenticate(credentials(headers))
            except Unauthorized as exc:
                err = to_api_error(exc)
                if _has_body(scope):              # close, so the server never drains what it will not read
                    err.headers = {**err.headers, "Connection": "close"}
                await error_response(Request(scope), err)(scope, receive, send)
                return
        await self.app(scope, receive, send)

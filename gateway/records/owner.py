"""Who owns a record: the name of the key that made the request."""
from __future__ import annotations

from fastapi import Request

from conch.gateway.auth import Gate, current_key


def caller(request: Request) -> tuple[str, bool]:
    """(owner, is_admin). On an open server every caller is "" and holds every role (as gateway/auth.py's
    roles are everyone's there); with keys, the owner is the key's name and admin its `admin` role."""
    gate: Gate | None = getattr(request.app.state, "gate", None)
    if gate is None:
        return "", True
    key = current_key.get() or gate.authenticate(request.headers.get("authorization"))
    return (key.name, key.admin) if key is not None else ("", True)    # None: a gate over an empty key ring

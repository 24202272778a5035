"""Who may touch a record: its owner's key, or an admin key whose models include the record's model."""
from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from conch.gateway.auth import Forbidden, Gate, credentials, current_key


@dataclass(frozen=True)
class Caller:
    """The key a request came with, as the record store judges it. `name` owns what it writes; `models` None is
    every model. On an open server every caller is Caller("", admin=True): every role is everyone's."""

    name: str
    admin: bool = False
    models: frozenset[str] | None = None

    def may_touch(self, owner: str, model: str | None) -> bool:
        """Reads, lists, deletes and cancels alike. A record of no model (a conversation) is another key's only
        to an admin of every model."""
        if owner == self.name:
            return True
        return self.admin and (self.models is None or (model is not None and model in self.models))

    def check_may_store(self) -> None:
        """A key that may use no model stores nothing of its own (a conversation): 403."""
        if self.models is not None and not self.models:
            raise Forbidden("this key may use no model, so it cannot store conversations")


OPEN = Caller("", admin=True)


def caller(request: HTTPConnection) -> Caller:
    """The request's key, from the key the guard checked (or the headers); OPEN without keys."""
    gate: Gate | None = getattr(request.app.state, "gate", None)
    if gate is None:
        return OPEN
    key = current_key.get() or gate.authenticate(credentials(request.headers))
    if key is None:                                     # a gate over an empty key ring
        return OPEN
    return Caller(key.name, key.admin, key.models)


def as_caller(who: Caller | str) -> Caller:
    """A bare name is that key without the admin role (what tests and internal writes pass)."""
    return who if isinstance(who, Caller) else Caller(who)

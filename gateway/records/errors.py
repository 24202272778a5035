"""The stored-records layer's three failures, registered in the gateway's error table.

RecordNotFound is the same 404 whether the id never existed, expired, was deleted, or belongs to another key:
an id reveals nothing about who else holds what. RecordTooLarge is a 507: a record larger than its owner's
share of the memory tier is refused, never acknowledged and then dropped. StoreUnavailable is a 503 with
Retry-After: Redis may hold the id and cannot be asked right now.
"""
from __future__ import annotations

from conch.gateway.errors import register_error


class RecordNotFound(Exception):
    def __init__(self, kind: str, record_id: str, param: str | None = None) -> None:
        self.message = f"No {kind} found with id '{record_id}'."
        super().__init__(self.message)
        self.kind, self.record_id, self.param = kind, record_id, param


class StoreUnavailable(Exception):
    def __init__(self, kind: str, record_id: str, retry_after: float = 1.0) -> None:
        self.message = (f"The {kind} '{record_id}' cannot be read right now: the record store's Redis tier is "
                        "not answering. Retry shortly.")
        super().__init__(self.message)
        self.kind, self.record_id, self.retry_after = kind, record_id, retry_after
        self.param = None


class RecordTooLarge(Exception):
    """A record the store cannot hold: larger than its owner's share of the memory tier (with no Redis tier
    to take it). Nothing is acknowledged: the write that would have held it is refused."""

    def __init__(self, key: str, size: int, share: int) -> None:
        kind, _, record_id = key.partition(":")
        self.message = (f"The {kind} '{record_id}' ({size} bytes) is larger than this key's share of the record "
                        f"store ({share} bytes), so it cannot be stored; send `store: false`, or store less.")
        super().__init__(self.message)
        self.kind, self.record_id, self.param = kind, record_id, None


register_error(RecordNotFound, 404, "not_found")
register_error(StoreUnavailable, 503, "service_unavailable")
register_error(RecordTooLarge, 507, "record_too_large")

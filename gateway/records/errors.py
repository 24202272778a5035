"""The stored-records layer's two failures, registered in the gateway's error table.

RecordNotFound is the same 404 whether the id never existed, expired, was deleted, or belongs to another key:
an id reveals nothing about who else holds what. StoreUnavailable is a 503 with Retry-After: the id is not
in this process's memory and Redis cannot be asked right now.
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


register_error(RecordNotFound, 404, "not_found")
register_error(StoreUnavailable, 503, "service_unavailable")

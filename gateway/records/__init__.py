"""Stored records: responses and conversations, owned by the key that made them, in memory and optionally
Redis (shared by replicas). See store.py for the tiers' invariants and conversations.py for conversations."""
from conch.gateway.records.errors import RecordNotFound, RecordTooLarge, StoreUnavailable
from conch.gateway.records.owner import Caller, caller
from conch.gateway.records.store import RecordStore, open_records

__all__ = ["Caller", "RecordNotFound", "RecordStore", "RecordTooLarge", "StoreUnavailable", "caller", "open_records"]

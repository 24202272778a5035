"""Stored records: responses and conversations, owned by the key that made them, in memory and optionally
Redis (shared by replicas). See store.py for the tiers' invariants and conversations.py for conversations."""
from conch.gateway.records.errors import RecordNotFound, StoreUnavailable
from conch.gateway.records.owner import caller
from conch.gateway.records.store import RecordStore, open_records

__all__ = ["RecordNotFound", "RecordStore", "StoreUnavailable", "caller", "open_records"]

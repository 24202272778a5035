"""Triton's `dynamic_batching` block: preferred batch sizes, the queue delay, priority levels and the queue
policy of each level, parsed from config.yaml (the same keys as config.pbtxt) or Triton's message.

    dynamic_batching:
      preferred_batch_size: [8, 16]
      max_queue_delay_microseconds: 2000
      priority_levels: 2                 # levels 1..2, 1 runs first; a request's priority 0 = the default
      default_priority_level: 2
      default_queue_policy: {timeout_action: REJECT, default_timeout_microseconds: 0,
                             allow_timeout_override: true, max_queue_size: 0}
      priority_queue_policy: {1: {max_queue_size: 64}}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conch.engine.errors import InvalidRequest

TIMEOUT_ACTIONS = ("REJECT", "DELAY")
_BATCHING_KEYS = {"preferred_batch_size", "max_queue_delay_microseconds", "priority_levels",
                  "default_priority_level", "default_queue_policy", "priority_queue_policy", "preserve_ordering"}
_POLICY_KEYS = {"timeout_action", "default_timeout_microseconds", "allow_timeout_override", "max_queue_size"}


@dataclass(frozen=True)
class QueuePolicy:
    timeout_action: str = "REJECT"      # a request past its timeout is refused (REJECT) or runs last (DELAY)
    default_timeout_us: int = 0         # 0: no timeout
    allow_timeout_override: bool = False  # a request's own timeout replaces the default
    max_queue_size: int = 0             # 0: unbounded

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> "QueuePolicy":
        data = _known(data, _POLICY_KEYS, "queue policy")
        action = str(data.get("timeout_action", "REJECT")).upper()
        if action not in TIMEOUT_ACTIONS:
            raise InvalidRequest(f"queue policy timeout_action must be one of {TIMEOUT_ACTIONS}, got {action!r}",
                                 param="config")
        return cls(action, int(data.get("default_timeout_microseconds", 0)),
                   bool(data.get("allow_timeout_override", False)), int(data.get("max_queue_size", 0)))


@dataclass(frozen=True)
class DynamicBatching:
    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    priority_levels: int = 0            # 0: one level
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy = QueuePolicy()
    priority_queue_policy: tuple[tuple[int, QueuePolicy], ...] = ()

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> "DynamicBatching":
        data = _known(data, _BATCHING_KEYS, "dynamic_batching")
        levels = int(data.get("priority_levels", 0))
        default_level = int(data.get("default_priority_level", 0))
        if levels < 0 or not 0 <= default_level <= levels:
            raise InvalidRequest(f"dynamic_batching: default_priority_level {default_level} is outside the "
                                 f"priority levels 1..{levels}", param="config")
        per_level = tuple(sorted((int(k), QueuePolicy.from_mapping(v))
                                 for k, v in _entries(data.get("priority_queue_policy"))))
        return cls(tuple(sorted(int(s) for s in data.get("preferred_batch_size", ()) or ())),
                   int(data.get("max_queue_delay_microseconds", 0)), levels, default_level,
                   QueuePolicy.from_mapping(data.get("default_queue_policy")), per_level)

    def level(self, priority: int) -> int:
        """A request's priority level: 0 takes the default; levels above priority_levels are the client's error.
        Without priority levels every request shares one level, whatever its priority."""
        if self.priority_levels == 0:
            return 1
        if not 0 <= priority <= self.priority_levels:
            raise InvalidRequest(f"priority must be between 0 and {self.priority_levels}, got {priority}",
                                 param="priority")
        return priority or self.default_priority_level or self.priority_levels

    def policy(self, level: int) -> QueuePolicy:
        return dict(self.priority_queue_policy).get(level, self.default_queue_policy)


def _known(data: dict[str, Any] | None, keys: set[str], what: str) -> dict[str, Any]:
    data = dict(data or {})
    unknown = sorted(set(data) - keys)
    if unknown:
        raise InvalidRequest(f"{what}: unknown keys {unknown}", param="config")
    return data


def _entries(mapping: Any) -> list[tuple[Any, Any]]:
    if isinstance(mapping, list):      # protobuf's JSON of a map: [{"key": ..., "value": ...}]
        return [(m["key"], m["value"]) for m in mapping]
    return list((mapping or {}).items())

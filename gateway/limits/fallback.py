"""What the shared (Redis) rate limiter decides while Redis cannot answer: the `--rate-limits-fallback` switch.

- `local` (the default): per-process buckets, each holding the key's limit divided by the number of
  processes that share the Redis (`--rate-limits-replicas`, or the Ray ingress replicas), so the fleet as a
  whole stays near the limit until Redis returns; then Redis's buckets decide again.
- `open`: every request passes (the behaviour before issue 29: a 30-a-minute key got 188 through in 15 s).
- `closed`: every request is refused with 503 and Retry-After (usage charged after a request is dropped).

`active` (Redis failing now) and `decisions` (takes decided here) are exported as metrics, so a dashboard
shows when limits are per-process.
"""
from __future__ import annotations

from conch.gateway.errors import APIError
from conch.gateway.limits.bucket import Decision, MemoryBuckets

FALLBACKS = ("local", "open", "closed")
_AFTER_THE_FACT = -1e17          # a `need` this low is usage charged after the request: nothing to refuse


class LimiterUnavailable(APIError):
    """503: the shared rate limiter cannot be reached and the fallback is `closed`."""

    def __init__(self) -> None:
        super().__init__(503, "rate limits cannot be checked now (their store is unreachable); retry later",
                         code="rate_limiter_unavailable", headers={"Retry-After": "1"})


class Fallback:
    def __init__(self, mode: str = "local", replicas: int = 1) -> None:
        if mode not in FALLBACKS:
            raise ValueError(f"rate-limit fallback must be one of {list(FALLBACKS)}, got {mode!r}")
        if replicas < 1:
            raise ValueError(f"rate-limit replicas must be at least 1, got {replicas}")
        self.mode, self.replicas = mode, replicas
        self.local = MemoryBuckets()
        self.active = False          # the last take found Redis failing
        self.decisions = 0           # takes decided here, since the start

    async def take(self, name: str, capacity: float, rate: float, cost: float, need: float) -> Decision:
        self.decisions += 1
        if self.mode == "open" or (self.mode == "closed" and need <= _AFTER_THE_FACT):
            return Decision(True)
        if self.mode == "closed":
            raise LimiterUnavailable()
        share = max(1.0, capacity / self.replicas)        # this process's part of the fleet's limit
        return await self.local.take(name, share, rate * share / capacity, cost, need)

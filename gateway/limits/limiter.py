"""Per-key limits: requests per minute (charged on arrival) and tokens per minute (usage charged when the
request is over; a key in debt is refused until the refill pays it back)."""
from __future__ import annotations

import asyncio
import math

from conch.engine.admission import Trace
from conch.gateway.auth import ApiKey, current_key
from conch.gateway.errors import APIError

_LIMITS = {
    "requests": ("rpm", "requests per min (RPM)", "x-ratelimit-limit-requests"),
    "tokens": ("tpm", "tokens per min (TPM)", "x-ratelimit-limit-tokens"),
}


_NO_NEED = -1e18     # charge after the fact: taken whatever the level


class RateLimited(APIError):
    """429 with Retry-After and the limit named, in the message and in an x-ratelimit-limit-* header."""

    def __init__(self, key: ApiKey, limit: str, value: int, retry_after: float) -> None:
        _, label, header = _LIMITS[limit]
        wait = max(1, math.ceil(retry_after))
        super().__init__(429, f"Rate limit reached for key '{key.name}' on {label}: Limit {value}. "
                              f"Please try again in {wait}s.", type=limit, code="rate_limit_exceeded",
                         headers={"Retry-After": str(wait), header: str(value)})
        self.limit, self.retry_after = limit, wait


class Limiter:
    def __init__(self, buckets) -> None:
        self.buckets = buckets                 # MemoryBuckets or RedisBuckets
        self._debits: set[asyncio.Task] = set()

    async def charge(self, key: ApiKey) -> None:
        """One request on arrival: refuse if the key is out of requests or in token debt."""
        if key.rpm:
            decision = await self.buckets.take(f"{key.name}:rpm", key.rpm, key.rpm / 60, 1, 1)
            if not decision.allowed:
                raise RateLimited(key, "requests", key.rpm, decision.retry_after)
        if key.tpm:
            decision = await self.buckets.take(f"{key.name}:tpm", key.tpm, key.tpm / 60, 0, 1)
            if not decision.allowed:
                raise RateLimited(key, "tokens", key.tpm, decision.retry_after)

    async def spend_tokens(self, key: ApiKey, tokens: int) -> None:
        if key.tpm and tokens:
            await self.buckets.take(f"{key.name}:tpm", key.tpm, key.tpm / 60, tokens, _NO_NEED)

    def on_finish(self, trace: Trace) -> None:
        """Engine observer: charge the request's tokens to the key that sent it (see gateway.auth)."""
        key = current_key.get()
        tokens = trace.prompt_tokens + trace.completion_tokens
        if key is None or not key.tpm or not tokens:
            return
        task = asyncio.ensure_future(self.spend_tokens(key, tokens))
        self._debits.add(task)
        task.add_done_callback(self._debits.discard)

    async def flush(self) -> None:
        while self._debits:
            await asyncio.gather(*list(self._debits), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        await self.buckets.close()


def open_limiter(spec: str | None, fallback: str = "local", replicas: int = 1) -> Limiter:
    """`memory` (default) or `redis://HOST:PORT/DB`; with Redis, what decides while it is down (`fallback`,
    gateway/limits/fallback.py) and how many processes share its limits (`replicas`)."""
    if not spec or spec == "memory":
        from conch.gateway.limits.bucket import MemoryBuckets

        return Limiter(MemoryBuckets())
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from conch.gateway.limits.fallback import Fallback
        from conch.gateway.limits.redis_buckets import RedisBuckets

        return Limiter(RedisBuckets(spec, fallback=Fallback(fallback, replicas)))
    raise ValueError(f"--rate-limits: expected 'memory' or 'redis://HOST:PORT/DB', got '{spec}'")

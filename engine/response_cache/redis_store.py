"""The Redis store (redis-py asyncio) and `RedisLink`, the guard every Redis user in Conch goes through.

Redis down or slow never fails a request: each command has a short deadline; a failure counts an error,
logs once, and opens a short break during which commands are skipped (a miss) instead of waiting on a dead
server. After the break the next command reconnects (the pool drops broken connections).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class RedisLink:
    def __init__(self, url: str, timeout: float = 0.25, pause: float = 1.0) -> None:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.url, self.timeout, self.pause = url, timeout, pause
        self.client = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0),
            health_check_interval=0)
        self.errors = 0
        self.skipped = 0
        self._down_until = 0.0
        self._down = False

    @property
    def up(self) -> bool:
        return not self._down

    async def call(self, command: Callable[[Any], Awaitable[T]], default: T) -> T:
        """`await command(client)`, or `default` when Redis fails, is slow, or is in its break."""
        if self._down and time.monotonic() < self._down_until:
            self.skipped += 1
            return default
        try:
            result = await asyncio.wait_for(command(self.client), self.timeout * 2)
        except asyncio.CancelledError:
            raise
        except Exception as exc:          # ConnectionError, TimeoutError, ResponseError...: all a miss
            self.errors += 1
            if not self._down:
                log.warning("redis at %s failed (%s: %s); serving without it until it answers",
                            self.url, type(exc).__name__, exc)
            self._down, self._down_until = True, time.monotonic() + self.pause
            return default
        if self._down:
            log.info("redis at %s is back", self.url)
            self._down = False
        return result

    async def close(self) -> None:
        try:
            await self.client.aclose()
        except Exception:
            pass


class RedisStore:
    """Values under `conch:rc:<model>:<sha256>` with a TTL."""

    name = "redis"

    def __init__(self, url: str, ttl: float | None = 3600.0, prefix: str = "conch:rc:", timeout: float = 0.25,
                 pause: float = 1.0) -> None:
        self.link = RedisLink(url, timeout=timeout, pause=pause)
        self.ttl, self.prefix = ttl, prefix

    @property
    def errors(self) -> int:
        return self.link.errors

    async def get(self, key: str) -> bytes | None:
        return await self.link.call(lambda r: r.get(self.prefix + key), None)

    async def set(self, key: str, value: bytes) -> None:
        ex = int(self.ttl) if self.ttl else None
        await self.link.call(lambda r: r.set(self.prefix + key, value, ex=ex), None)

    async def close(self) -> None:
        await self.link.close()

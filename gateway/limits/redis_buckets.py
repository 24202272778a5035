"""Buckets in Redis, so that every replica enforces one limit. One Lua script per take: atomic, and timed
by Redis's own clock (replicas' clocks may disagree). Redis down or slow: the fallback decides (gateway/limits/
fallback.py: per-process buckets by default), counted, logged once.
"""
from __future__ import annotations

from conch.engine.response_cache.redis_store import RedisLink
from conch.gateway.limits.bucket import Decision
from conch.gateway.limits.fallback import Fallback

# KEYS[1] = bucket; ARGV = capacity, rate (per second), cost, need. Returns {allowed, retry_after}.
_TAKE = """
local capacity, rate = tonumber(ARGV[1]), tonumber(ARGV[2])
local cost, need = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'level', 'at')
local level = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
level = math.min(capacity, level + math.max(0, now - at) * rate)
local allowed, wait = 1, 0
if level < need then
  allowed, wait = 0, (need - level) / rate
else
  level = math.max(-capacity, level - cost)
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(2 * capacity / rate) + 60)
return {allowed, tostring(wait)}
"""


class RedisBuckets:
    name = "redis"

    def __init__(self, url: str, prefix: str = "conch:rl:", timeout: float = 0.25,
                 fallback: Fallback | None = None) -> None:
        self.link = RedisLink(url, timeout=timeout)
        self.prefix = prefix
        self.fallback = fallback or Fallback()
        self._script = self.link.client.register_script(_TAKE)

    @property
    def errors(self) -> int:
        return self.link.errors

    async def take(self, name: str, capacity: float, rate: float, cost: float, need: float) -> Decision:
        result = await self.link.call(
            lambda r: self._script(keys=[self.prefix + name], args=[capacity, rate, cost, need], client=r), None)
        self.fallback.active = result is None
        if result is None:
            return await self.fallback.take(name, capacity, rate, cost, need)
        allowed, wait = result
        return Decision(bool(int(allowed)), float(wait))

    async def close(self) -> None:
        await self.link.close()

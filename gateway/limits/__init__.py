"""Rate limits: token buckets per API key (requests and tokens per minute), in memory or shared via Redis."""
from conch.gateway.limits.fallback import FALLBACKS, LimiterUnavailable
from conch.gateway.limits.limiter import Limiter, RateLimited, open_limiter

__all__ = ["FALLBACKS", "Limiter", "LimiterUnavailable", "RateLimited", "open_limiter"]

"""Rate limits: token buckets per API key (requests and tokens per minute), in memory or shared via Redis."""
from gateway.limits.limiter import Limiter, RateLimited, open_limiter

__all__ = ["Limiter", "RateLimited", "open_limiter"]

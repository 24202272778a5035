"""vLLM's scheduler stats, kept for `VLLMBackend.stats()`: a stat logger that vLLM calls once per engine step.

vLLM hands each logger a `SchedulerStats` (num_running_reqs, num_waiting_reqs, kv_cache_usage as a 0..1
fraction, and prefix_cache_stats counting the tokens queried and hit *in that update*). The recorder keeps
the latest gauges and sums the prefix cache counters, so BackendStats' counters are cumulative.
Invariant: written only by vLLM's output handler task, read by the event loop: plain attribute stores.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from conch.engine.backend import BackendStats


class StatsRecord:
    """The latest BackendStats, updated from vLLM's SchedulerStats."""

    def __init__(self) -> None:
        self.current = BackendStats(kv_cache_usage=0.0)

    def update(self, scheduler_stats: Any) -> None:
        if scheduler_stats is None:
            return
        cache = scheduler_stats.prefix_cache_stats
        prior = self.current
        if getattr(cache, "reset", False):
            prior = replace(prior, prefix_cache_queries=0, prefix_cache_hits=0)
        self.current = BackendStats(
            running=scheduler_stats.num_running_reqs,
            waiting=scheduler_stats.num_waiting_reqs + getattr(scheduler_stats, "num_skipped_waiting_reqs", 0),
            kv_cache_usage=float(scheduler_stats.kv_cache_usage),
            prefix_cache_queries=prior.prefix_cache_queries + cache.queries,
            prefix_cache_hits=prior.prefix_cache_hits + cache.hits,
        )


def stat_logger_factory(record: StatsRecord) -> Callable[..., Any]:
    """A per-engine StatLoggerFactory for AsyncLLM(stat_loggers=[...]) feeding `record` (vllm imported here)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Recorder(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
                   engine_idx: int = 0) -> None:
            record.update(scheduler_stats)

        def log_engine_initialized(self) -> None:
            return None

    return _Recorder

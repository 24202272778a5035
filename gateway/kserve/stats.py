"""Triton's statistics extension: per model version, the requests that succeeded and failed and where their
time went (queue, compute_input, compute_infer, compute_output: the four parts add up to the success time),
response cache hits and misses, and `batch_stats` per batch size. An engine observer: it reads every
request's `Trace` (LLM generations from every face, tensor requests from /v2, gRPC, ensemble steps and BLS)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from conch.engine.admission import Trace
from conch.engine.backend import CountsExecutions
from conch.engine.loaded_model import LoadedModel


@dataclass
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.ns += int(seconds * 1e9)

    def as_dict(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


_PARTS = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass
class ModelStats:
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)
    cache_hit: Duration = field(default_factory=Duration)
    cache_miss: Duration = field(default_factory=Duration)
    batches: dict[int, BatchStats] = field(default_factory=dict)
    last_inference_ms: int = 0

    def record(self, t: Trace) -> None:
        self.last_inference_ms = int(time.time() * 1000)
        if not t.succeeded:
            self.fail.add(t.duration)
            return
        self.success.add(t.duration)
        self.queue.add(t.queued)
        self.compute_input.add(t.compute_input)
        self.compute_infer.add(t.compute_infer)
        self.compute_output.add(t.compute_output)
        if t.cache_hit is not None:
            (self.cache_hit if t.cache_hit else self.cache_miss).add(t.duration)
        if t.batch_size:
            batch = self.batches.setdefault(t.batch_size, BatchStats())
            batch.compute_input.add(t.compute_input)
            batch.compute_infer.add(t.compute_infer)
            batch.compute_output.add(t.compute_output)

    def as_dict(self, model: LoadedModel) -> dict:
        backend = model.backend
        executions = backend.steps if isinstance(backend, CountsExecutions) else self.success.count
        return {
            "name": model.name, "version": model.config.version, "last_inference": self.last_inference_ms,
            "inference_count": self.success.count, "execution_count": executions,
            "inference_stats": {"success": self.success.as_dict(), "fail": self.fail.as_dict(),
                                **{p: getattr(self, p).as_dict() for p in _PARTS},
                                "cache_hit": self.cache_hit.as_dict(), "cache_miss": self.cache_miss.as_dict()},
            "batch_stats": [{"batch_size": size, "compute_input": b.compute_input.as_dict(),
                             "compute_infer": b.compute_infer.as_dict(), "compute_output": b.compute_output.as_dict()}
                            for size, b in sorted(self.batches.items())],
        }


class Statistics:
    """Every model version's statistics; registered as an engine observer (gateway/app.py)."""

    def __init__(self) -> None:
        self._models: dict[tuple[str, str], ModelStats] = {}

    def on_finish(self, trace: Trace) -> None:
        self.of(trace.model, trace.version).record(trace)

    def of(self, name: str, version: str) -> ModelStats:
        return self._models.setdefault((name, version), ModelStats())

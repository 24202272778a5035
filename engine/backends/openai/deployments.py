"""Picking a deployment: least in-flight requests per unit of weight, skipping those cooled down.

A deployment that fails `cooldown_failures` times in a row (a connection error, a 5xx or a timeout) is cooled
down for `cooldown` seconds: no request is sent to it meanwhile, unless every deployment is cooling (then
the one whose cooldown ends first is tried: a request never fails without a try). After its cooldown it is
tried again; one success makes it healthy, one more failure cools it down again.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from conch.engine.repository.upstream import RouteConfig, UpstreamConfig


@dataclass
class Deployment:
    config: RouteConfig
    client: Any = None             # its openai.AsyncOpenAI (engine/backends/openai/client.py) once started
    inflight: int = 0
    failures: int = 0              # consecutive
    cooled_until: float = 0.0      # monotonic seconds
    served: int = 0
    failed: int = 0

    @property
    def label(self) -> str:
        return self.config.label

    def load(self) -> float:
        """In-flight requests per unit of weight, counting the one being placed."""
        return (self.inflight + 1) / self.config.weight


class Router:
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self.deployments = [Deployment(route) for route in config.routes]

    def healthy(self, d: Deployment) -> bool:
        return d.cooled_until <= self.clock()

    def order(self) -> list[Deployment]:
        """Every deployment in the order to try them: healthy ones by load (ties: config order), then the
        cooling ones by when their cooldown ends."""
        healthy = sorted((d for d in self.deployments if self.healthy(d)), key=Deployment.load)
        cooling = sorted((d for d in self.deployments if not self.healthy(d)), key=lambda d: d.cooled_until)
        return healthy + cooling

    def attempts(self) -> list[Deployment]:
        """The deployments one request may try: the healthy ones, or the first cooling one if none is."""
        order = self.order()
        healthy = [d for d in order if self.healthy(d)]
        return healthy or order[:1]

    def succeeded(self, d: Deployment) -> None:
        d.failures, d.cooled_until = 0, 0.0
        d.served += 1

    def failed(self, d: Deployment) -> None:
        d.failures += 1
        d.failed += 1
        if d.failures >= self.config.cooldown_failures:
            d.cooled_until = self.clock() + self.config.cooldown

    def any_healthy(self) -> bool:
        return any(self.healthy(d) for d in self.deployments)

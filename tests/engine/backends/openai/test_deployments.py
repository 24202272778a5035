"""Picking a deployment: least in-flight per weight, cooldown after repeated failures, recovery after it."""
from __future__ import annotations

from conch.engine.backends.openai.deployments import Router
from conch.engine.repository.upstream import upstream_config


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _router(*weights: float, failures: int = 2, cooldown: float = 30.0) -> tuple[Router, Clock]:
    config = upstream_config("m", {"routes": [{"base_url": f"http://h{i}/v1", "weight": w, "name": f"d{i}"}
                                              for i, w in enumerate(weights)],
                                   "cooldown_failures": failures, "cooldown": cooldown})
    router, clock = Router(config), Clock()
    router.clock = clock
    return router, clock


def _labels(deployments) -> list[str]:
    return [d.label for d in deployments]


def test_least_inflight_per_weight_goes_first():
    router, _ = _router(1, 2)
    a, b = router.deployments
    assert _labels(router.order()) == ["d1", "d0"]        # (0+1)/2 < (0+1)/1
    b.inflight = 2                                         # (2+1)/2 = 1.5 > 1
    assert _labels(router.order()) == ["d0", "d1"]
    a.inflight = 2                                         # 3 > 1.5
    assert _labels(router.order()) == ["d1", "d0"]


def test_weighted_share_of_concurrent_requests():
    router, _ = _router(1, 3)
    for _ in range(8):                                     # place 8 requests that stay in flight
        router.attempts()[0].inflight += 1
    assert [d.inflight for d in router.deployments] == [2, 6]


def test_repeated_failures_cool_down_then_retry():
    router, clock = _router(1, 1, failures=2, cooldown=30)
    a, b = router.deployments
    router.failed(a)
    assert router.healthy(a)                               # one failure is not yet a pattern
    router.failed(a)
    assert not router.healthy(a)
    assert _labels(router.attempts()) == ["d1"]
    clock.now += 31
    assert router.healthy(a) and "d0" in _labels(router.attempts())
    router.failed(a)                                       # still failing after its cooldown: cooled again
    assert not router.healthy(a)
    clock.now += 31
    router.succeeded(a)
    router.failed(a)
    assert router.healthy(a)                               # a success reset the count


def test_all_cooling_still_tries_the_one_that_recovers_first():
    router, clock = _router(1, 1, failures=1, cooldown=30)
    a, b = router.deployments
    router.failed(b)
    clock.now += 10
    router.failed(a)
    assert not router.any_healthy()
    assert _labels(router.attempts()) == ["d1"]            # b's cooldown ends first

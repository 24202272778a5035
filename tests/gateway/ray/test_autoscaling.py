"""Autoscaling on a real local Ray: a model with autoscaling_config (1..2 replicas, 2 ongoing requests per
replica as the target) grows to 2 replicas under 12 concurrent streams and shrinks back to 1 once idle."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.conftest import write_repository
from tests.ray_helpers import start_ray_server, stop_ray_server

pytestmark = pytest.mark.slow

SCALING = {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 2,
           "upscale_delay_s": 1, "downscale_delay_s": 3, "look_back_period_s": 2, "metrics_interval_s": 0.5}


@pytest.fixture(scope="module")
def server(ray_head, tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {
        "weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8, "num_threads": 1,
        "parameters": {"ray": {"autoscaling_config": SCALING}}}})
    s = start_ray_server(ray_head, ["--model-repository", str(root)], root)
    yield s
    stop_ray_server(s, graceful=False)            # the module's cluster stops next


def _replicas(ray_driver) -> int:
    from ray import serve

    status = serve.status().applications["conch"].deployments["model-tiny"]
    return status.replica_states.get("RUNNING", 0)


async def _until(ray_driver, count: int, polls: int = 600) -> int:
    for _ in range(polls):
        n = await asyncio.to_thread(_replicas, ray_driver)
        if n == count:
            return n
        await asyncio.sleep(0.2)
    return await asyncio.to_thread(_replicas, ray_driver)


async def test_scales_up_under_load_and_back_down(server, ray_driver):
    assert _replicas(ray_driver) == 1
    body = {"model": "tiny", "prompt": "go", "max_tokens": 600, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=300) as http:
        load = [asyncio.ensure_future(http.post(server.v1 + "/completions", json={**body, "prompt": f"go {i}"}))
                for i in range(12)]
        grown = await _until(ray_driver, 2)
        results = await asyncio.gather(*load)
    assert grown == 2
    assert [r.status_code for r in results] == [200] * 12
    assert await _until(ray_driver, 1) == 1

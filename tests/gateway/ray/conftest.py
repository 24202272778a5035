"""A real local Ray cluster per test module (tests/ray_helpers.py), and this process joined to it."""
from __future__ import annotations

import os

import pytest

from tests.ray_helpers import RAY_ENV, start_ray_head


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    head = start_ray_head(tmp_path_factory.mktemp("ray"))
    yield head
    head.stop()


@pytest.fixture(scope="module")
def ray_driver(ray_head):
    """This process joined to the cluster, to reach the replicas' actors (serve handles, ray.kill)."""
    import ray

    os.environ.update(RAY_ENV)
    ray.init(address=ray_head.address, namespace="serve", log_to_driver=False)
    yield ray
    ray.shutdown()

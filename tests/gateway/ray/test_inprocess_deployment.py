"""A Ray Serve deployment embedding Conch's in-process API (tests/gateway/ray/inprocess_deployment.py, the
Ray Serve + Triton integration's code with `tritonserver` replaced), deployed with `serve.run` on a real local
Ray cluster over the inflight_batcher_llm repository, answers GET /generate?query=... and an OpenAI-style
/v1/chat/completions."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import free_port
from tests.gateway.kserve.inflight_repo import build_inflight
from tests.ray_helpers import RAY_ENV, ROOT, start_ray_head

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray-inprocess")
    repository = build_inflight(tmp / "repo")
    head = start_ray_head(tmp, num_cpus=2)
    port, log = free_port(), tmp / "driver.log"
    driver = subprocess.Popen([sys.executable, "-m", "tests.gateway.ray.inprocess_deployment", head.address,
                               str(port), str(repository)], stdout=log.open("w"), stderr=subprocess.STDOUT,
                              cwd=ROOT, env={**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 400
    while "DEPLOYED" not in log.read_text():
        if driver.poll() is not None or time.monotonic() > deadline:
            driver.kill()
            head.stop()
            raise RuntimeError(log.read_text()[-4000:])
        time.sleep(1)
    yield f"http://127.0.0.1:{port}"
    driver.terminate()
    driver.wait(30)
    head.stop()


def test_generate_answers(deployment):
    r = httpx.get(f"{deployment}/generate", params={"query": "What is Ray Serve?"}, timeout=120)
    assert r.status_code == 200 and isinstance(r.json(), str)


def test_chat_completions_answers(deployment):
    r = httpx.post(f"{deployment}/v1/chat/completions", timeout=120,
                   json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant"

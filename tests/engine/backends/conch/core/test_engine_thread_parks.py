"""An engine thread with no work parks (exits, and libgomp's workers for it go with it: engine/torch_threads.py)
and the next request starts another: the model stays ready and healthy meanwhile, answers the same greedy
tokens after, and a model stopped while parked refuses what comes later. The server runs in this process, so
the test sees the engine thread itself."""
from __future__ import annotations

import time

import httpx

GENERATE = {"text_input": "Hi there", "parameters": {"max_tokens": 6, "temperature": 0}}


def _parked(core, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while core.thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not core.thread.is_alive()


def _generate(server) -> httpx.Response:
    return httpx.post(f"{server.url}/v2/models/tiny/generate", json=GENERATE, timeout=60)


def test_an_idle_engine_thread_parks_and_the_next_request_wakes_another(tiny_inprocess):
    core = tiny_inprocess.engine.get("tiny").backend.core
    first = _generate(tiny_inprocess)
    assert first.status_code == 200
    before = core.thread
    assert _parked(core)
    assert httpx.get(f"{tiny_inprocess.url}/v2/models/tiny/ready").status_code == 200
    assert httpx.get(f"{tiny_inprocess.url}/health").status_code == 200
    again = _generate(tiny_inprocess)
    assert again.status_code == 200 and again.json()["text_output"] == first.json()["text_output"]
    assert core.thread is not before


def test_a_model_stopped_while_parked_refuses_later_requests(tiny_inprocess):
    core = tiny_inprocess.engine.get("tiny").backend.core
    assert _generate(tiny_inprocess).status_code == 200
    assert _parked(core)
    core.stop()                                  # what an unload does (ConchBackend.stop), with no thread to see it
    refused = _generate(tiny_inprocess)
    assert refused.status_code == 503 and "not ready" in refused.json()["error"]
    assert not core.thread.is_alive() and not core.serving

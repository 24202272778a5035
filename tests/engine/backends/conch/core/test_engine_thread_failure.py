"""An engine thread whose steps keep failing fails its requests and stops, never spins: after
MAX_FAILED_STEPS failed steps in a row the model is not ready (its /ready, /health), later requests are refused
at once with 503, and no step runs after that. One failed step alone fails only its batch."""
from __future__ import annotations

import httpx

from conch.engine.backends.conch.backend import MAX_FAILED_STEPS

GENERATE = {"text_input": "Hi", "parameters": {"max_tokens": 2}}


def _generate(server) -> httpx.Response:
    return httpx.post(f"{server.url}/v2/models/tiny/generate", json=GENERATE, timeout=60)


def test_failing_steps_fail_their_requests_then_the_model_stops(tiny_inprocess):
    server = tiny_inprocess
    backend = server.engine.get("tiny").backend
    forward, calls = backend.runner.forward, []

    def broken(batch):
        calls.append(batch)
        raise RuntimeError("the forward pass broke")

    backend.runner.forward = broken
    try:
        first = _generate(server)
        assert first.status_code >= 500 and "the forward pass broke" in first.text
        assert httpx.get(f"{server.url}/v2/models/tiny/ready").status_code == 200    # one batch, not the engine
        for _ in range(MAX_FAILED_STEPS - 1):
            assert _generate(server).status_code >= 500
        assert httpx.get(f"{server.url}/v2/models/tiny/ready").status_code == 400
        assert httpx.get(f"{server.url}/health").status_code == 503
        refused = _generate(server)
        assert refused.status_code == 503 and "not ready" in refused.json()["error"]
        assert len(calls) == MAX_FAILED_STEPS and not backend.core.thread.is_alive()
    finally:
        backend.runner.forward = forward

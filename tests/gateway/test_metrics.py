"""/metrics through a real server with a memory response cache: Triton's counters and the LLM histograms
move as requests flow, cancellations are counted; rate-limit rejections are counted by model and limit."""
from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conch.gateway.app import build_app
from conch.gateway.auth import ApiKey, Gate, KeyRing
from conch.gateway.limits import open_limiter
from tests.conftest import start_server, write_repository
from tests.serving_helpers import fake_engine

TRITON = ["nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
          "nv_inference_exec_count", "nv_inference_pending_request_count", "nv_inference_queue_duration_us",
          "nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model"]
HISTOGRAMS = ["conch_time_to_first_token_seconds", "conch_inter_token_latency_seconds",
              "conch_e2e_request_latency_seconds", "conch_prompt_tokens", "conch_generation_tokens"]


def _metrics(text: str) -> dict[str, dict]:
    """family -> {sample name + sorted labels: value}"""
    out = {}
    for family in text_string_to_metric_families(text):
        out[family.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
    return out


def _value(m, family, sample=None, default=None, **labels) -> float:
    sample = sample or family
    for (name, lab), value in m.get(family, {}).items():
        if name in (sample, sample + "_total") and all(dict(lab).get(k) == v for k, v in labels.items()):
            return value
    if default is not None:                 # a labelled histogram has no samples before its first request
        return default
    raise KeyError((family, sample, labels))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}})
    s = start_server(["--model-repository", str(root), "--response-cache", "memory"], root)
    yield s
    s.stop()


async def test_metrics_move_as_requests_flow(server):
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        before = _metrics((await client.get("/metrics")).text)
        assert set(TRITON) <= set(before)
        assert "text/plain" in (await client.get("/metrics")).headers["content-type"]
        body = {"model": "tiny", "prompt": "metrics please", "max_tokens": 6, "temperature": 0}
        for _ in range(2):                                             # a miss, then a hit
            assert (await client.post("/v1/completions", json=body)).status_code == 200
        for _ in range(50):                                            # the miss is stored in the background
            await client.post("/v1/completions", json=body)
            if _value(_metrics((await client.get("/metrics")).text), "nv_cache_num_hits_per_model", model="tiny") > 0:
                break
        after = _metrics((await client.get("/metrics")).text)
    assert set(TRITON + HISTOGRAMS) <= set(after)
    requests = _value(after, "nv_inference_request_success", model="tiny", version="1") - \
        _value(before, "nv_inference_request_success", model="tiny", version="1")
    assert requests >= 3
    assert _value(after, "nv_inference_count", model="tiny") >= 3
    assert _value(after, "nv_cache_num_misses_per_model", model="tiny") >= 1
    assert _value(after, "nv_cache_num_hits_per_model", model="tiny") >= 1
    # the miss's steps: its 6 tokens take at least 2 (a step makes 1 + up to speculative_tokens (4) tokens)
    assert _value(after, "nv_inference_exec_count", model="tiny") >= 2
    assert _value(after, "nv_inference_pending_request_count", model="tiny") == 0

    def count(metrics: str, histogram: str) -> float:
        return _value(metrics, histogram, histogram + "_count", default=0, model="tiny")

    for h in ("conch_time_to_first_token_seconds", "conch_e2e_request_latency_seconds",
              "conch_prompt_tokens", "conch_generation_tokens"):
        assert count(after, h) - count(before, h) == requests, h
    assert count(after, "conch_inter_token_latency_seconds") >= 5
    assert _value(after, "conch_generation_tokens", "conch_generation_tokens_sum", model="tiny") >= 6 * requests
    assert _value(after, "conch_num_requests_running", model="tiny") == 0


async def test_a_dropped_stream_is_counted_as_cancelled(server):
    body = {"model": "tiny", "prompt": "go on", "max_tokens": 1000, "temperature": 1.0, "ignore_eos": True,
            "stream": True}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        start = _value(_metrics((await client.get("/metrics")).text), "conch_request_cancelled", model="tiny")
        async with client.stream("POST", "/v1/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    break                                              # one chunk, then hang up
        for _ in range(300):
            m = _metrics((await client.get("/metrics")).text)
            if _value(m, "conch_request_cancelled", model="tiny") > start and \
                    _value(m, "conch_num_requests_running", model="tiny") == 0:    # freed at the next step
                break
            await asyncio.sleep(0.02)
    assert _value(m, "conch_request_cancelled", model="tiny") == start + 1
    assert _value(m, "nv_inference_request_failure", model="tiny", reason="CANCELED") >= 1
    assert _value(m, "conch_num_requests_running", model="tiny") == 0


async def test_rate_limit_rejections_are_counted():
    gate = Gate(KeyRing([ApiKey("sk", "k", rpm=1), ApiKey("sk-scrape", metrics=True)]), open_limiter("memory"))
    app = build_app(fake_engine(), gate=gate)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        codes = [(await client.post("/v1/completions", headers={"Authorization": "Bearer sk"},
                                    json={"model": "m", "prompt": "x", "max_tokens": 1})).status_code for _ in range(3)]
        m = _metrics((await client.get("/metrics", headers={"Authorization": "Bearer sk-scrape"})).text)
    assert codes == [200, 429, 429]
    assert _value(m, "conch_rate_limit_rejections", model="m", limit="requests") == 2

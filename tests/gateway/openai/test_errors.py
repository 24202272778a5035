"""Bad input on /v1 gets the right status and an OpenAI-shaped error body naming the parameter."""
from __future__ import annotations

import httpx
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID

MODEL = DEFAULT_MODEL_ID
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def http(tiny_server):
    with httpx.Client(base_url=tiny_server.url, timeout=60) as c:
        yield c


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_unknown_model_is_404(http):
    err = _error(http.post("/v1/chat/completions", json={"model": "nope", "messages": MSG}), 404)
    assert err["code"] == "model_not_found" and "nope" in err["message"]


@pytest.mark.parametrize("field,value", [
    ("temperature", 3.0), ("top_p", 0.0), ("n", 0), ("max_tokens", 0), ("presence_penalty", 5),
    ("top_logprobs", 30), ("logit_bias", {"x": 1}), ("logit_bias", {"999999": 1}), ("stop", [""]),
    ("stream_options", {"include_usage": True}), ("messages", []),
])
def test_invalid_parameter_is_400_naming_it(http, field, value):
    body = {"model": "tiny", "messages": MSG, "logprobs": field == "top_logprobs", field: value}
    err = _error(http.post("/v1/chat/completions", json=body), 400)
    assert err["param"] == field, err


def test_unknown_parameter_is_rejected_not_ignored(http):
    err = _error(http.post("/v1/chat/completions", json={"model": "tiny", "messages": MSG, "audio": {}}), 400)
    assert err["param"] == "audio" and err["code"] == "unsupported_parameter"


def test_missing_field(http):
    err = _error(http.post("/v1/completions", json={"model": "tiny"}), 400)
    assert err["param"] == "prompt"


def test_malformed_json(http):
    response = http.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    err = _error(response, 400)
    assert err["code"] == "invalid_json"


def test_prompt_longer_than_context_names_both_numbers(http):
    prompt = "hello " * 3000
    err = _error(http.post("/v1/completions", json={"model": "tiny", "prompt": prompt, "max_tokens": 1}), 400)
    assert "2048" in err["message"] and err["param"] == "prompt"
    assert any(ch.isdigit() for ch in err["message"].split("2048", 1)[1])


def test_prompt_plus_max_tokens_over_context(http):
    err = _error(http.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 5000}), 400)
    assert "2048" in err["message"] and "5000" in err["message"]


def test_oversized_body_is_413(http):
    err = _error(http.post("/v1/completions", json={"model": "tiny", "prompt": "x" * (17 * 1024 * 1024)}), 413)
    assert err["code"] == "payload_too_large"


def test_unknown_route_is_404(http):
    _error(http.get("/v1/nothing"), 404)


def test_health(http):
    assert http.get("/health").status_code == 200
    assert http.get("/v2/health/live").status_code == 200
    assert http.get("/v2/health/ready").status_code == 200

"""What real clients tripped over on /v1 and /v2 generate: a JSON body with another Content-Type (plain `curl -d`)
is read as JSON; no error names 'None'; context-length errors carry code context_length_exceeded; /v1/models
lists only models /v1 can serve; generate_stream refuses exclude_input_in_output false."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.gateway.kserve.triton_repo import build_repository, start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_repository(tmp_path_factory.mktemp("repo"), vllm=False)   # tiny, python steps, an ensemble
    s = start_triton(root)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_a_json_body_is_read_whatever_the_content_type(http, content_type):
    body = json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 2})
    headers = {"content-type": content_type} if content_type else {}
    r = http.post("/v1/completions", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("body,param", [
    ("[1, 2]", None),
    (json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}), "top_logprobs"),
    ("not json", None),
])
def test_no_error_names_none(http, body, param):
    r = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400
    error = r.json()["error"]
    assert "None" not in error["message"] and error["param"] == param, error
    assert http.get("/v1/models").status_code == 200          # the connection stays usable


def test_context_length_errors_carry_their_code(server):
    client = openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    long = "hello " * 5000
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": long}], max_tokens=2)
    with pytest.raises(openai.BadRequestError) as completion:
        client.completions.create(model="tiny", prompt="hi", max_tokens=100000)
    for err in (chat, completion):
        assert err.value.code == "context_length_exceeded" and "context length" in err.value.message


def test_v1_models_lists_only_models_v1_can_serve(http):
    listed = {m["id"] for m in http.get("/v1/models").json()["data"]}
    assert "tiny" in listed
    assert not listed & {"preprocess", "postprocess"}              # python tensor models: /v2 only
    assert http.get("/v1/models/preprocess").status_code == 404
    assert http.get("/v2/models/preprocess").status_code == 200


def test_generate_stream_refuses_exclude_input_in_output_false(http):
    url = "/v2/models/tiny/generate_stream"
    base = {"text_input": "hi", "parameters": {"max_tokens": 2}}
    r = http.post(url, json={**base, "exclude_input_in_output": False})
    assert r.status_code == 400 and "exclude_input_in_output" in r.json()["error"]
    r = http.post(url, json={**base, "parameters": {**base["parameters"], "exclude_input_in_output": False}})
    assert r.status_code == 400
    for ok in ({**base}, {**base, "exclude_input_in_output": True}):
        assert http.post(url, json=ok).status_code == 200

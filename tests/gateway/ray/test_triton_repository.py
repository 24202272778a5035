"""Triton's `inflight_batcher_llm` repository (tests/gateway/kserve/inflight_repo.py: ensemble, preprocessing
and postprocessing python models, the BLS model, the LLM step on Conch's engine) served unchanged by
`conch serve --ray` on a real local Ray, driven by tritonclient and the openai SDK (an embedding model beside
it, on /v1 and /v2); with `--trace-config mode=opentelemetry`, the ingress replica exports the request's spans
to a real OTLP receiver, parented across the client's `traceparent`."""
from __future__ import annotations

import json
import secrets

import httpx
import numpy as np
import openai
import pytest
import tritonclient.http as httpclient

from tests.conftest import write_repository
from tests.gateway.kserve.inflight_repo import build_inflight
from tests.gateway.kserve.triton_repo import eventually
from tests.otlp_receiver import start_receiver
from tests.ray_helpers import start_ray_server, stop_ray_server

pytestmark = pytest.mark.slow
PROMPT = "What is machine learning?"


@pytest.fixture(scope="module")
def served(ray_head, tmp_path_factory):
    root = build_inflight(tmp_path_factory.mktemp("repo"))
    write_repository(root, {"minilm": {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}})
    receiver = start_receiver()
    server = start_ray_server(ray_head, ["--model-repository", str(root),
                                         "--trace-config", "mode=opentelemetry", "--trace-config", "rate=1",
                                         "--trace-config", f"opentelemetry,url={receiver.url}",
                                         "--trace-config", "opentelemetry,bsp_schedule_delay=100"], root)
    yield server, receiver
    stop_ray_server(server, graceful=False)       # the module's cluster stops next
    receiver.stop()


def triton(server) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.url.removeprefix("http://"), network_timeout=120)


def tensor(name: str, array: np.ndarray, datatype: str) -> httpclient.InferInput:
    t = httpclient.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return t


def test_every_model_is_ready_and_describes_itself(served):
    client = triton(served[0])
    assert client.is_server_ready()
    for name in ("ensemble", "preprocessing", "tensorrt_llm", "postprocessing", "tensorrt_llm_bls"):
        assert client.is_model_ready(name), name
    metadata = client.get_model_metadata("ensemble")
    assert {i["name"] for i in metadata["inputs"]} >= {"text_input", "max_tokens"}
    assert [o["name"] for o in metadata["outputs"]] == ["text_output"]
    assert client.get_model_config("ensemble")["platform"] == "ensemble"


def test_ensemble_infer_runs_every_step(served):
    result = triton(served[0]).infer("ensemble", [
        tensor("text_input", np.array([[PROMPT.encode()]], dtype=np.object_), "BYTES"),
        tensor("max_tokens", np.array([[8]], dtype=np.int32), "INT32")])
    text = result.as_numpy("text_output").reshape(-1)[0].decode()
    assert text.startswith(PROMPT) and len(text) > len(PROMPT)          # TRT-LLM's contract: the prompt first


def test_python_model_answers_its_own_tensors(served):
    result = triton(served[0]).infer("preprocessing", [
        tensor("QUERY", np.array([[PROMPT.encode()]], dtype=np.object_), "BYTES"),
        tensor("REQUEST_OUTPUT_LEN", np.array([[4]], dtype=np.int32), "INT32")])
    ids, length = result.as_numpy("INPUT_ID"), result.as_numpy("REQUEST_INPUT_LEN")
    assert ids.shape[1] == length.reshape(-1)[0] > 0


def test_generate_through_the_ensemble_and_the_bls_stream(served):
    server, _ = served
    r = httpx.post(f"{server.url}/v2/models/ensemble/generate", timeout=120,
                   json={"text_input": PROMPT, "parameters": {"max_tokens": 8}})
    assert r.status_code == 200, r.text
    assert r.json()["text_output"].startswith(PROMPT)
    with httpx.stream("POST", f"{server.url}/v2/models/tensorrt_llm_bls/generate_stream", timeout=120,
                      json={"text_input": PROMPT, "max_tokens": 6, "stream": True}) as s:
        assert s.status_code == 200
        events = [json.loads(e[6:]) for e in s.read().decode().split("\n\n") if e]
    assert len(events) > 1 and all("error" not in e for e in events), events   # BLS -> the LLM's replica


def test_openai_sdk_on_the_llm_step_and_refused_on_tensor_models(served):
    client = openai.OpenAI(base_url=served[0].v1, api_key="none", max_retries=0, timeout=120)
    raw = client.completions.with_raw_response.create(model="tensorrt_llm", prompt=PROMPT, max_tokens=4)
    assert raw.parse().choices[0].finish_reason in ("length", "stop")
    assert raw.headers["x-conch-replica"] != raw.headers["x-conch-ingress"]   # generated on the LLM's replica
    chat = client.chat.completions.create(model="tensorrt_llm", max_tokens=4,
                                          messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.role == "assistant"
    for name in ("preprocessing", "ensemble"):   # token-id steps: refused on /v1 only (they served /v2 above)
        with pytest.raises(openai.BadRequestError) as err:
            client.completions.create(model=name, prompt="hi", max_tokens=2)
        assert "/v2 infer" in err.value.message, name


def test_an_embedding_model_answers_v1_and_v2(served):
    server, _ = served
    client = openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=120)
    vectors = client.embeddings.create(model="minilm", input=["hello", "world"]).data
    assert len(vectors) == 2 and len(vectors[0].embedding) == 384
    result = triton(server).infer("minilm", [tensor("TEXT", np.array([b"hello"], dtype=np.object_), "BYTES")])
    assert np.allclose(result.as_numpy("EMBEDDING")[0], vectors[0].embedding, atol=1e-5)


def test_trace_config_is_honoured_by_the_ingress(served):
    server, receiver = served
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    r = httpx.post(f"{server.url}/v2/models/ensemble/generate", headers={"traceparent": f"00-{trace_id}-{span_id}-01"},
                   json={"text_input": PROMPT, "parameters": {"max_tokens": 4}}, timeout=120)
    assert r.status_code == 200 and r.headers["traceparent"].split("-")[1] == trace_id
    names = {"POST /v2/models/ensemble/generate", "infer preprocessing", "infer postprocessing"}
    assert eventually(lambda: names <= {s.name for s in receiver.of_trace(trace_id)}), \
        [s.name for s in receiver.of_trace(trace_id)]
    spans = {s.name: s for s in receiver.of_trace(trace_id)}
    root = spans["POST /v2/models/ensemble/generate"]
    assert root.parent_id == span_id
    llm = [s for s in receiver.of_trace(trace_id) if s.name.endswith(" tensorrt_llm")]
    assert llm and llm[0].attributes["gen_ai.usage.output_tokens"] > 0                # the step on the replica

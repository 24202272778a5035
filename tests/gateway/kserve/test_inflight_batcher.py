"""Triton's inflight_batcher_llm layout on CPU: the TensorRT-LLM tensor contract served by Conch's engine,
the ensemble answering the documented curl (streamed and not), the BLS model over gRPC streaming, and an LLM
config declaring tensors no contract serves refused at load with the reason."""
from __future__ import annotations

import json
import queue

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.gateway.kserve.inflight_repo import build_inflight
from tests.gateway.kserve.triton_repo import start_triton

PROMPT = "What is machine learning?"
CURL = {"text_input": PROMPT, "parameters": {"max_tokens": 16, "bad_words": [""], "stop_words": [""]}}
BAD_LLM = ('name: "bad_llm"\nbackend: "transformers"\nmax_batch_size: 1\n'
           'input [ { name: "prompt_tokens", data_type: TYPE_INT32, dims: [ -1 ] } ]\n'
           'output [ { name: "text", data_type: TYPE_STRING, dims: [ -1 ] } ]\n'
           'parameters { key: "weights" value: { string_value: "builtin:tiny" } }\n')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_inflight(tmp_path_factory.mktemp("repo"))
    (root / "bad_llm" / "1").mkdir(parents=True)
    (root / "bad_llm" / "config.pbtxt").write_text(BAD_LLM)
    server = start_triton(root)
    yield server
    server.stop()


def test_documented_curl_through_the_ensemble(server):
    r = httpx.post(f"{server.url}/v2/models/ensemble/generate", json=CURL, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model_name"] == "ensemble" and body["text_output"].startswith(PROMPT)   # TRT-LLM: prompt first
    assert len(body["text_output"]) > len(PROMPT)


def test_documented_curl_streamed(server):
    with httpx.stream("POST", f"{server.url}/v2/models/ensemble/generate_stream", timeout=120,
                      json={**CURL, "stream": True}) as s:
        events = [json.loads(e[6:]) for e in s.read().decode().split("\n\n") if e]
    assert len(events) > 1 and all("error" not in e for e in events)
    assert not "".join(e["text_output"] for e in events).startswith(PROMPT)      # streamed: new text only


def test_tensorrt_llm_tensors_directly(server):
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    ids = np.array([[1, 2, 3, 4]], dtype=np.int32)
    tensors = {"input_ids": ids, "input_lengths": np.array([[4]], dtype=np.int32),
               "request_output_len": np.array([[5]], dtype=np.int32),
               "temperature": np.array([[0.0]], dtype=np.float32),
               "return_log_probs": np.array([[True]])}
    inputs = []
    for name, array in tensors.items():
        tensor = httpclient.InferInput(name, list(array.shape), "BOOL" if array.dtype == bool else
                                       {np.int32: "INT32", np.float32: "FP32"}[array.dtype.type])
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("tensorrt_llm", inputs)
    out, length = result.as_numpy("output_ids"), result.as_numpy("sequence_length")
    assert out.shape[:2] == (1, 1) and out[0, 0, :4].tolist() == [1, 2, 3, 4]    # prompt first
    assert length.tolist() == [[out.shape[2]]] and 5 < out.shape[2] <= 9
    logprobs = result.as_numpy("output_log_probs")
    assert logprobs.shape[2] == out.shape[2] - 4 and (logprobs <= 0).all()
    assert result.as_numpy("cum_log_probs")[0, 0] == pytest.approx(logprobs.sum(), rel=1e-4)
    beams = httpclient.InferInput("beam_width", [1, 1], "INT32")
    beams.set_data_from_numpy(np.array([[2]], dtype=np.int32))
    with pytest.raises(Exception, match="beam_width"):
        client.infer("tensorrt_llm", inputs + [beams])


def test_bls_model_streams_over_grpc(server):
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    values = {"text_input": (np.array([[PROMPT.encode()]], dtype=np.object_), "BYTES"),
              "max_tokens": (np.array([[6]], dtype=np.int32), "INT32"),
              "stream": (np.array([[True]]), "BOOL")}
    inputs = []
    for name, (array, datatype) in values.items():
        tensor = grpcclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer("tensorrt_llm_bls", inputs, request_id="b1")
        first = answers.get(timeout=120)
    finally:
        client.stop_stream()
    assert first[1] is None and first[0].as_numpy("text_output") is not None


def test_undeclared_llm_tensors_are_refused_at_load(server):
    index = {m["name"]: m for m in httpx.post(f"{server.url}/v2/repository/index", json={}).json()}
    assert index["bad_llm"]["state"] == "UNAVAILABLE" and "prompt_tokens" in index["bad_llm"]["reason"]
    assert index["ensemble"]["state"] == "READY"

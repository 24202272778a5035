"""The second hardening pass's malformed requests, over a real server (HTTP and gRPC): each was a 500 (or a
wrong 200/503) and is a 400 naming what the client sent, on a server that keeps serving.

The server holds the tiny LLM (a batch of 2 and a queue of 2, so a request of more prompts than it can ever
hold is cheap to send) and the embedding model."""
from __future__ import annotations

import json

import grpc
import httpx
import numpy as np
import openai
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.conftest import free_port, start_server, write_repository

BIG = "1" * 5000                                    # past Python's 4,300-digit int limit
DEEP = "[" * 2000 + "]" * 2000
BINARY_HEADER = {"Inference-Header-Content-Length": "0", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 2, "max_queue_size": 2},
        "minilm": {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}})
    grpc_port = free_port()
    server = start_server(["--model-repository", str(root), "--grpc-port", str(grpc_port)], root)
    server.grpc_port = grpc_port
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def grpc_client(server):
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    yield client
    client.close()


def _bytes_input(name: str, values: list[bytes]) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, [len(values)], "BYTES")
    tensor.set_data_from_numpy(np.array(values, dtype=np.object_).reshape([len(values)]))
    return tensor


def _grpc_refusal(call) -> str:
    with pytest.raises(InferenceServerException) as err:
        call()
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT", err.value.message()
    return err.value.message()


def _llm(text: str = "Hi", sampling: str = '{"max_tokens": 1}') -> list:
    return [_bytes_input("text_input", [text.encode()]), _bytes_input("sampling_parameters", [sampling.encode()])]


# -- the binary-data header is no way around the body guard ---------------------------------------------------
@pytest.mark.parametrize("path, body", [
    ("/v1/completions", b'{"model": "tiny", "prompt": "\\ud800", "max_tokens": 1}'),
    ("/v1/chat/completions", b'{"model": "tiny", "messages": [{"role": "user", "content": "\\ud800"}]}'),
    ("/v1/embeddings", b'{"model": "minilm", "input": "\\ud800"}'),
    ("/v2/models/tiny/generate", b"[" * 100_000),
])
def test_the_binary_header_is_refused_where_no_binary_data_is_read(http, path, body):
    r = http.post(path, content=body, headers=BINARY_HEADER)
    assert r.status_code == 400 and "Inference-Header-Content-Length" in r.text
    assert http.post(path, content=body, headers={"Content-Type": "application/json"}).status_code == 400


def test_the_binary_header_still_serves_infer(http):
    header = json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": 6}}]}).encode()
    r = http.post("/v2/models/minilm/infer", content=header + b"\x02\x00\x00\x00hi",
                  headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [1, 384]


# -- integers past 4,300 digits, and JSON nested inside strings ----------------------------------------------
@pytest.mark.parametrize("path, body", [
    ("/v2/models/tiny/generate", '{"text_input": "Hi", "parameters": {"max_tokens": %s}}' % BIG),
    ("/v2/models/tiny/infer", '{"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], '
                              '"data": ["Hi"]}], "parameters": {"max_tokens": %s}}' % BIG),
    ("/v2/models/minilm/infer", '{"inputs": [{"name": "INPUT_IDS", "datatype": "INT64", "shape": [1, 1], '
                                '"data": [%s]}]}' % BIG),
    ("/v1/completions", '{"model": "tiny", "prompt": "Hi", "max_tokens": %s}' % BIG),
])
def test_an_integer_past_python_s_digit_limit_is_400(http, path, body):
    r = http.post(path, content=body.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "4300 digits" in r.text


def test_a_digit_run_inside_a_string_is_text(http):
    r = http.post("/v2/models/tiny/generate", json={"text_input": "Hi", "parameters": {"max_tokens": 1, "stop": BIG}})
    assert r.status_code == 200


@pytest.mark.parametrize("sampling", ['{"stop": %s}' % DEEP, '{"max_tokens": %s}' % BIG])
def test_json_inside_sampling_parameters_is_bounded(http, grpc_client, sampling):
    r = http.post("/v2/models/tiny/generate", json={"text_input": "Hi", "sampling_parameters": sampling})
    assert r.status_code == 400 and "sampling_parameters" in r.json()["error"]
    assert "sampling_parameters" in _grpc_refusal(lambda: grpc_client.infer("tiny", _llm(sampling=sampling)))


def test_json_nested_in_a_parameter_s_text_is_bounded(http, grpc_client):
    r = http.post("/v2/models/tiny/generate", json={"text_input": "Hi", "parameters": {"stop": DEEP}})
    assert r.status_code == 400 and "'stop'" in r.json()["error"] and len(r.text) < 500
    assert "max_tokens" in _grpc_refusal(lambda: grpc_client.infer("tiny", _llm(sampling="{}"),
                                                                   parameters={"max_tokens": BIG}))


# -- token ids, sampling values and grammars that cannot sample ------------------------------------------------
@pytest.mark.parametrize("prompt", [[1099511627776], [-1], [[5, 49152]]])
def test_prompt_token_ids_outside_the_vocabulary_are_400(oai, prompt):
    with pytest.raises(openai.BadRequestError) as err:
        oai.completions.create(model="tiny", prompt=prompt, max_tokens=1)
    assert err.value.body["param"] == "prompt" and "outside the vocabulary" in err.value.body["message"]


def test_a_repetition_penalty_that_overflows_is_400(oai, http):
    with pytest.raises(openai.BadRequestError) as err:
        oai.completions.create(model="tiny", prompt="Hi", max_tokens=1, extra_body={"repetition_penalty": 1e-300})
    assert err.value.body["param"] == "repetition_penalty"
    r = http.post("/v2/models/tiny/generate", json={"text_input": "Hi", "parameters": {"repetition_penalty": 1e-300}})
    assert r.status_code == 400 and "repetition_penalty" in r.text


def test_a_grammar_that_matches_nothing_is_400(oai, grpc_client):
    with pytest.raises(openai.BadRequestError) as err:
        oai.completions.create(model="tiny", prompt="Hi", max_tokens=2, extra_body={"guided_grammar": "start: start"})
    assert "matches no finite string" in err.value.body["message"]
    sampling = json.dumps({"max_tokens": 2, "guided_grammar": "start: a\na: b\nb: a"})
    assert "matches no finite string" in _grpc_refusal(lambda: grpc_client.infer("tiny", _llm(sampling=sampling)))
    ok = oai.completions.create(model="tiny", prompt="Hi", max_tokens=2, extra_body={"guided_grammar": 'start: "a"'})
    assert ok.choices[0].text == "a"


# -- the embedding model's tensors and parameters -------------------------------------------------------------
def _texts_body(texts: list[str], **parameters) -> dict:
    return {"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [len(texts)], "data": texts}],
            "parameters": parameters}


def test_an_empty_text_tensor_is_400(http, grpc_client):
    r = http.post("/v2/models/minilm/infer", json=_texts_body([]))
    assert r.status_code == 400 and "TEXT" in r.json()["error"]
    assert "TEXT" in _grpc_refusal(lambda: grpc_client.infer("minilm", [_bytes_input("TEXT", [])]))


@pytest.mark.parametrize("timeout", ["x", -1, 1.5])
def test_a_bad_timeout_is_400(http, server, timeout):
    r = http.post("/v2/models/minilm/infer", json=_texts_body(["hi"], timeout=timeout))
    assert r.status_code == 400 and "timeout" in r.json()["error"]
    request = pb.ModelInferRequest(model_name="minilm", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="TEXT", datatype="BYTES", shape=[1], contents=pb.InferTensorContents(bytes_contents=[b"hi"]))])
    request.parameters["timeout"].string_param = str(timeout)      # tritonclient keeps "timeout" for itself
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        with pytest.raises(grpc.RpcError) as err:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "timeout" in err.value.details()


def test_a_timeout_of_zero_is_no_timeout(http):
    assert http.post("/v2/models/minilm/infer", json=_texts_body(["hi"], timeout=0)).status_code == 200


# -- more prompts than the model can ever hold ----------------------------------------------------------------
def test_more_prompts_than_the_model_holds_is_400_not_503(oai):
    with pytest.raises(openai.BadRequestError) as err:
        oai.completions.create(model="tiny", prompt=["Hi"] * 5, max_tokens=1)     # batch 2 + queue 2
    assert err.value.body["param"] == "prompt" and "at most 4" in err.value.body["message"]
    assert len(oai.completions.create(model="tiny", prompt=["Hi"] * 4, max_tokens=1).choices) == 4


# -- what a first-time user sees ------------------------------------------------------------------------------
def test_an_embedding_model_on_chat_and_completions_says_it_serves_embeddings(oai):
    for call in (lambda: oai.chat.completions.create(model="minilm", messages=[{"role": "user", "content": "Hi"}]),
                 lambda: oai.completions.create(model="minilm", prompt="Hi")):
        with pytest.raises(openai.BadRequestError) as err:
            call()
        assert "serves embeddings only" in err.value.body["message"] and err.value.body["param"] == "model"


def test_models_say_which_endpoints_serve_them(oai):
    cards = {m.id: m.model_extra["endpoints"] for m in oai.models.list().data}
    assert cards == {"tiny": ["chat.completions", "completions"], "minilm": ["embeddings"]}


def test_an_image_part_is_named(oai):
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    with pytest.raises(openai.BadRequestError) as err:
        oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": content}], max_tokens=1)
    assert "no vision" in err.value.body["message"] and "text only" in err.value.body["message"]
    assert err.value.body["param"] == "messages.0.content.1"          # the part itself (docs/vision.md)

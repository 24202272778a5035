"""One table, one builder, three faces: over a real server, the same bad parameter gets the same 400 on /v1
(openai SDK: OpenAI's error body with `param`), /v2 generate (`{"error": ...}`) and gRPC (tritonclient:
INVALID_ARGUMENT), whether gRPC carries it in the `sampling_parameters` tensor or in the request's
InferParameter map. Out-of-range values read the same word for word on every face; a wrong type is refused by
pydantic on /v1 (its own words, the same param) and by the builder on the tensor faces (the same words)."""
from __future__ import annotations

import json

import httpx
import openai
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.gateway.grpc.test_grpc_service import llm_inputs
from tests.gateway.kserve.triton_repo import build_repository, start_triton

UNSUPPORTED_SCHEMA = {"type": "object", "propertyNames": {"maxLength": 3}}
# (parameters, the parameter the 400 names); each is refused before any token is generated
OUT_OF_RANGE = [
    ({"temperature": 2.5}, "temperature"), ({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"), ({"top_k": -2}, "top_k"), ({"min_p": 1.5}, "min_p"),
    ({"presence_penalty": 5.0}, "presence_penalty"), ({"frequency_penalty": -2.5}, "frequency_penalty"),
    ({"repetition_penalty": 0.0}, "repetition_penalty"), ({"seed": 2**64}, "seed"), ({"max_tokens": -1}, "max_tokens"),
    ({"min_tokens": 9, "max_tokens": 4}, "min_tokens"), ({"stop": [""]}, "stop"),
    ({"stop": [str(i) for i in range(17)]}, "stop"), ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"stop_token_ids": [10**6]}, "stop_token_ids"), ({"guided_regex": "("}, "guided_regex"),
    ({"guided_json": UNSUPPORTED_SCHEMA}, "guided_json"),
    ({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_regex"),
]
WRONG_TYPE = [({"temperature": "hot"}, "temperature"), ({"max_tokens": 1.5}, "max_tokens"),
              ({"ignore_eos": "maybe"}, "ignore_eos"), ({"top_k": "many"}, "top_k")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_triton(build_repository(tmp_path_factory.mktemp("repo"), example=False, vllm=False))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def v1(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


def _v1(client: openai.OpenAI, params: dict) -> dict:
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="tiny", prompt="Hi", max_tokens=2, extra_body=params)
    assert err.value.status_code == 400
    return err.value.body                       # the SDK gives the error object: message, type, param, code


def _v2(server, params: dict) -> str:
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", timeout=60,
                   json={"text_input": "Hi", "parameters": {"max_tokens": 2, **params}})
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"}
    return r.json()["error"]


def _grpc(client: grpcclient.InferenceServerClient, params: dict, in_tensor: bool) -> str:
    params = {"max_tokens": 2, **params}
    with pytest.raises(InferenceServerException) as err:
        if in_tensor:
            client.infer("tiny", llm_inputs(grpcclient, "Hi", params))
        else:
            scalars = {k: _scalar(v) for k, v in params.items()}
            client.infer("tiny", llm_inputs(grpcclient, "Hi", {}), parameters=scalars)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
    return err.value.message()


def _scalar(value):
    """InferParameter holds a bool, an int64, a double or a string: anything else travels as JSON text."""
    if isinstance(value, (bool, float, str)) or (isinstance(value, int) and -2**63 <= value < 2**63):
        return value
    return json.dumps(value)


@pytest.mark.parametrize("params, param", OUT_OF_RANGE, ids=[json.dumps(p)[:40] for p, _ in OUT_OF_RANGE])
def test_out_of_range_is_the_same_400_on_every_face(server, v1, grpc_client, params, param):
    body = _v1(v1, params)
    assert body["param"] == param and body["type"] == "invalid_request_error", body
    assert param in body["message"]
    assert _v2(server, params) == body["message"]
    assert _grpc(grpc_client, params, in_tensor=True) == body["message"]
    assert _grpc(grpc_client, params, in_tensor=False) == body["message"]


@pytest.mark.parametrize("params, param", WRONG_TYPE, ids=[json.dumps(p) for p, _ in WRONG_TYPE])
def test_wrong_type_is_a_400_naming_it_on_every_face(server, v1, grpc_client, params, param):
    assert _v1(v1, params)["param"] == param
    message = _v2(server, params)
    assert param in message and "must be" in message
    assert _grpc(grpc_client, params, in_tensor=True) == message
    assert _grpc(grpc_client, params, in_tensor=False) == message


def test_chat_reads_the_same_table(server, v1):
    with pytest.raises(openai.BadRequestError) as err:
        v1.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                                   logprobs=True, top_logprobs=21)
    assert err.value.body["param"] == "top_logprobs" and "[0, 20]" in err.value.body["message"]
    with pytest.raises(openai.BadRequestError) as err:
        v1.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                   max_completion_tokens=-1)
    assert err.value.body["param"] == "max_completion_tokens"
    assert _v2(server, {"temperature": 3}) == "'temperature' must be in [0, 2], got 3.0"


def test_in_range_values_generate_on_every_face(server, v1, grpc_client):
    params = {"temperature": 2.0, "top_p": 1.0, "top_k": -1, "seed": 2**64 - 1, "repetition_penalty": 1.5}
    assert v1.completions.create(model="tiny", prompt="Hi", max_tokens=2, extra_body=params).choices[0].text
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", timeout=60,
                   json={"text_input": "Hi", "parameters": {"max_tokens": 2, **params}})
    assert r.status_code == 200, r.text
    result = grpc_client.infer("tiny", llm_inputs(grpcclient, "Hi", {"max_tokens": 2, **params}))
    assert result.as_numpy("text_output")[0].startswith(b"Hi")

"""Structured outputs on the Triton faces: `json_schema` / `regex` / `choice` / `grammar` (and `guided_*`) in
/v2 generate `parameters` and in the gRPC `sampling_parameters` JSON, with the tiny random-weights model;
unenforceable specs are refused up front with a 400 / INVALID_ARGUMENT that names the keyword."""
from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.gateway.grpc.test_grpc_service import llm_inputs
from tests.gateway.kserve.triton_repo import build_repository, start_triton

SCHEMA = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                           "size": {"type": "integer", "minimum": 1, "maximum": 99}},
          "required": ["colour", "size"], "additionalProperties": False}
UNSUPPORTED = {"type": "object", "propertyNames": {"maxLength": 3}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_triton(build_repository(tmp_path_factory.mktemp("repo"), example=False, vllm=False))
    yield server
    server.stop()


def _generate(server, parameters: dict, suffix: str = "generate") -> httpx.Response:
    body = {"text_input": "Describe a ball:", "parameters": {"max_tokens": 40, "exclude_input_in_output": True,
                                                              **parameters}}
    return httpx.post(f"{server.url}/v2/models/tiny/{suffix}", json=body, timeout=120)


@pytest.mark.parametrize("key, schema", [("json_schema", SCHEMA), ("json_schema", json.dumps(SCHEMA)),
                                         ("guided_json", SCHEMA)])
def test_generate_json_schema_output_validates(server, key, schema):
    for seed in range(3):
        r = _generate(server, {key: schema, "seed": seed, "temperature": 1.0})
        assert r.status_code == 200, r.text
        jsonschema.validate(json.loads(r.json()["text_output"]), SCHEMA)


def test_generate_stream_json_schema(server):
    with httpx.stream("POST", f"{server.url}/v2/models/tiny/generate_stream", timeout=120,
                      json={"text_input": "Ball:", "parameters": {"max_tokens": 40, "json_schema": SCHEMA}}) as r:
        assert r.status_code == 200
        events = [json.loads(e[6:]) for e in r.read().decode().split("\n\n") if e]
    jsonschema.validate(json.loads("".join(e["text_output"] for e in events)), SCHEMA)


@pytest.mark.parametrize("parameters, check", [
    ({"regex": "[ab]{3}"}, lambda t: re.fullmatch("[ab]{3}", t)),
    ({"guided_regex": "x[0-9]"}, lambda t: re.fullmatch("x[0-9]", t)),
    ({"choice": ["yes", "no"]}, lambda t: t in ("yes", "no")),
    ({"guided_choice": ["up", "down"]}, lambda t: t in ("up", "down")),
    ({"grammar": 'start: "a" | "bb"'}, lambda t: t in ("a", "bb")),
])
def test_generate_other_constraints(server, parameters, check):
    r = _generate(server, {**parameters, "temperature": 1.0, "seed": 1})
    assert r.status_code == 200, r.text
    assert check(r.json()["text_output"]), r.json()["text_output"]


@pytest.mark.parametrize("parameters, words", [
    ({"json_schema": UNSUPPORTED}, ["json_schema", "propertyNames"]),
    ({"guided_json": json.dumps(UNSUPPORTED)}, ["guided_json", "propertyNames"]),
    ({"json_schema": "{not json"}, ["json_schema", "JSON"]),
    ({"json_schema": [1]}, ["json_schema"]),
    ({"regex": "("}, ["regex"]),
    ({"choice": []}, ["choice"]),
    ({"regex": "a", "choice": ["a"]}, ["only one", "choice"]),
])
def test_generate_refuses_bad_specs_up_front(server, parameters, words):
    for suffix in ("generate", "generate_stream"):
        r = _generate(server, parameters, suffix)
        assert r.status_code == 400 and isinstance(r.json()["error"], str)
        assert all(w in r.json()["error"] for w in words), r.json()


def test_grpc_sampling_parameters_json_schema(grpc_client):
    result = grpc_client.infer("tiny", llm_inputs(grpcclient, "Ball:", {"max_tokens": 40, "json_schema": SCHEMA},
                                                  exclude_input_in_output=True))
    jsonschema.validate(json.loads(result.as_numpy("text_output")[0]), SCHEMA)
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("tiny", llm_inputs(grpcclient, "x", {"json_schema": UNSUPPORTED}))
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "propertyNames" in err.value.message()

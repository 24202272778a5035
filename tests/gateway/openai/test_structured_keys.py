"""Open objects end to end (issue 29): SmolLM2 asked for an object whose extra keys the schema allows writes no
key twice and closes the object within its bound on undeclared keys, so the output always parses.

The model's `grammar_bounds` are small here (3 undeclared keys, short numbers and strings) so that a small max_tokens
covers the longest output the bounds allow; grammars/json_keys.py holds the check."""
from __future__ import annotations


import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.conftest import start_server, write_repository
from tests.grammars.checking import parse_unique

MODEL = DEFAULT_MODEL_ID
EXTRA = 3
BOUNDS = {"max_extra_keys": EXTRA, "max_integer_digits": 2, "max_fraction_digits": 1, "max_string_length": 8}
SCHEMAS = {
    "transform": {"type": "object", "properties": {"name": {"type": "string"}},
                  "additionalProperties": {"type": "number"}},
    "labels": {"type": "object", "properties": {"id": {"type": "integer"}, "kind": {"enum": ["a", "b"]}},
               "required": ["id"], "additionalProperties": {"type": "string", "maxLength": 6}},
    "any_object": {"type": "object"},
}
SCALE = "Give the scale of the image as JSON: scale_x, scale_y, scale_x, scale_y, scale_x, scale_y, ..."
REPEAT = "Repeat the key 'a' as many times as you can in one JSON object."
CASES = [("transform", SCALE), ("labels", REPEAT), ("any_object", REPEAT)]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 4,
                                    "grammar_bounds": BOUNDS}})
    server = start_server(["--model-repository", str(root)], root)
    yield openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=600)
    server.stop()


@pytest.mark.parametrize(("name", "prompt"), CASES)
def test_open_objects_parse_with_no_key_twice(client, name, prompt):
    schema = SCHEMAS[name]
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=120, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop", text
    value = parse_unique(text)
    assert len(set(value) - set(schema.get("properties", {}))) <= EXTRA, text

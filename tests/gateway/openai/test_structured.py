"""Structured outputs end to end with SmolLM2: every output parses and validates, and schemas Conch cannot
honour are refused up front with a 400 naming the keyword."""
from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.grammars.schemas import BOUNDED, SCHEMAS

MODEL = DEFAULT_MODEL_ID
ASK = "Answer with JSON that fits the requested schema."


@pytest.fixture(scope="module")
def aclient(smollm2_server):
    return openai.AsyncOpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def client(smollm2_server):
    return openai.OpenAI(base_url=smollm2_server.v1, api_key="none", max_retries=0, timeout=600)


async def _one(aclient, case, stream: bool, max_tokens: int = 200) -> tuple[str, str]:
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": f"{ASK} ({case.name})"}], max_tokens=max_tokens,
                  temperature=0,
                  response_format={"type": "json_schema",
                                   "json_schema": {"name": case.name, "schema": case.schema, "strict": True}})
    if not stream:
        r = await aclient.chat.completions.create(**kwargs)
        return r.choices[0].message.content, r.choices[0].finish_reason
    text, finish = "", None
    async for chunk in await aclient.chat.completions.create(stream=True, **kwargs):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


async def _suite(aclient, cases, max_tokens: int) -> None:
    results = await asyncio.gather(*[_one(aclient, case, i % 2 == 1, max_tokens) for i, case in enumerate(cases)])
    for case, (text, finish) in zip(cases, results, strict=True):
        assert finish == "stop", (case.name, finish, text)
        jsonschema.validate(json.loads(text), case.schema)


async def test_every_bounded_schema_parses_and_validates(aclient):
    await _suite(aclient, BOUNDED, 200)


@pytest.mark.slow
async def test_every_schema_of_the_suite_parses_and_validates(aclient):
    assert len(SCHEMAS) >= 30
    await _suite(aclient, SCHEMAS, 400)


def test_json_object_mode_gives_an_object(client):
    ask = [{"role": "user", "content": "Return a JSON object with one key, name, holding a cat's name."}]
    r = client.chat.completions.create(model=MODEL, messages=ask, max_tokens=200, temperature=0,
                                       response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)


class Person(BaseModel):
    name: str
    age: int


def test_sdk_parse_returns_a_populated_model(client):
    r = client.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "Invent a person."}],
                                      max_tokens=80, temperature=0, response_format=Person)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person) and person.name


def test_vllm_extensions_regex_choice_and_grammar(client):
    ask = [{"role": "user", "content": "Pick one."}]
    r = client.chat.completions.create(model=MODEL, messages=ask, max_tokens=10, temperature=0,
                                       extra_body={"guided_choice": ["red", "green", "blue"]})
    assert r.choices[0].message.content in {"red", "green", "blue"}
    r = client.chat.completions.create(model=MODEL, messages=ask, max_tokens=20, temperature=0,
                                       extra_body={"structured_outputs": {"regex": r"[0-9]{3}-[a-z]{2}"}})
    assert __import__("re").fullmatch(r"[0-9]{3}-[a-z]{2}", r.choices[0].message.content)
    r = client.completions.create(model=MODEL, prompt="Say yes or no:", max_tokens=5, temperature=0,
                                  extra_body={"guided_grammar": 'start: "yes" | "no"'})
    assert r.choices[0].text in {"yes", "no"}


async def test_constrained_and_free_requests_share_a_batch(aclient):
    case = next(c for c in SCHEMAS if c.bounded)
    free = [aclient.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"Say hi {i}"}],
                                            max_tokens=8, temperature=0) for i in range(3)]
    results = await asyncio.gather(_one(aclient, case, False), *free, _one(aclient, case, True))
    for text, _finish in (results[0], results[-1]):
        jsonschema.validate(json.loads(text), case.schema)
    assert all(r.choices[0].message.content for r in results[1:-1])


@pytest.mark.parametrize("schema,keyword", [
    ({"type": "object", "propertyNames": {"maxLength": 3}}, "propertyNames"),
    ({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}, "uniqueItems"),
])
def test_unsupported_keyword_is_400_naming_it(smollm2_server, schema, keyword):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}
    r = httpx.post(f"{smollm2_server.v1}/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and keyword in r.json()["error"]["message"]
    assert r.json()["error"]["param"] == "response_format"


@pytest.mark.parametrize("field,value", [
    ("response_format", {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "nope"}}}),
    ("response_format", {"type": "xml"}),
    ("guided_regex", "([a-z"),
    ("guided_choice", []),
])
def test_malformed_constraint_is_400(smollm2_server, field, value):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], field: value}
    r = httpx.post(f"{smollm2_server.v1}/chat/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"].startswith(field)


def test_old_dialects_annotations_and_extensions_are_accepted_and_enforced(smollm2_server):
    """A draft-04 schema with a vendor extension, annotations, a typo'd keyword and an unknown format reaches
    the model (they are ignored, as JSON Schema says), and its validation keywords still hold, draft-04's
    boolean exclusiveMaximum included."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "title": "T",
              "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
              "properties": {"a": {"type": "string", "maxLength": 10, "contentMediaType": "text/plain",
                                   "format": "no-such-format", "readonly": True, "description": "d"},
                             "n": {"type": "integer", "minimum": 0, "maximum": 9, "exclusiveMaximum": True}},
              "required": ["a", "n"], "additionalProperties": False}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Give a and n."}], "max_tokens": 60,
            "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}}
    r = httpx.post(f"{smollm2_server.v1}/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    value = json.loads(r.json()["choices"][0]["message"]["content"])
    jsonschema.Draft4Validator(schema).validate(value)
    assert value["n"] < 9

"""Conformance: a grammar spec is enforced (JSON schema, regex, choice) whatever the backend."""
from __future__ import annotations

import json
import re

import jsonschema

from conch.grammars import Choice as OneOf
from conch.grammars import JsonSchema, Regex
from tests.engine.backends.conformance.drive import chat, one

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}


async def test_a_json_schema_gives_a_valid_instance(engine):
    choice = await one(engine, prompt=chat("Describe a person as JSON."), max_tokens=60,
                       grammar=JsonSchema.from_dict(PERSON))
    assert choice.finish_reason == "stop", choice.text
    jsonschema.validate(json.loads(choice.text), PERSON)


async def test_a_regex_is_matched_whole(engine):
    choice = await one(engine, prompt=chat("Give me a phone number."), max_tokens=20,
                       grammar=Regex(r"[0-9]{3}-[0-9]{4}"))
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", choice.text), choice.text


async def test_a_choice_gives_one_of_its_options(engine):
    options = ("sunny", "rainy", "cloudy with a chance of meatballs")
    choice = await one(engine, prompt=chat("What is the weather like?"), max_tokens=20, temperature=1.0, seed=5,
                       grammar=OneOf(options))
    assert choice.text in options and choice.finish_reason == "stop"

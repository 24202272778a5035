"""grammars/spec.py: specs are frozen, hashable, and canonical where the text allows."""

from __future__ import annotations

import dataclasses

import pytest

from conch.grammars import Choice, Grammar, JsonObject, JsonSchema, Regex


def test_json_schema_is_canonical_and_keeps_key_order():
    loose = JsonSchema('{ "type" : "object",\n "properties": {"b": {}, "a": {}} }')
    assert loose.schema == '{"type":"object","properties":{"b":{},"a":{}}}'
    assert loose == JsonSchema.from_dict({"type": "object", "properties": {"b": {}, "a": {}}})
    assert hash(loose) == hash(JsonSchema.from_dict({"type": "object", "properties": {"b": {}, "a": {}}}))
    assert loose != JsonSchema.from_dict({"type": "object", "properties": {"a": {}, "b": {}}})  # order is meaning


def test_json_schema_keeps_unparseable_text_for_validate_to_report():
    assert JsonSchema("{not json").schema == "{not json"


def test_json_schema_round_trips_to_a_dict():
    schema = {"type": "string", "description": "naïve ✓"}
    assert JsonSchema.from_dict(schema).as_dict() == schema


def test_specs_are_frozen_and_hashable():
    specs = [JsonSchema('{"type":"integer"}'), JsonObject(), Regex("a+"), Choice(("x", "y")), Grammar('start: "a"')]
    assert len(set(specs + specs)) == len(specs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        specs[2].pattern = "b"  # type: ignore[misc]


def test_choice_stores_a_tuple():
    choice = Choice(["a", "b"])  # type: ignore[arg-type]
    assert choice.options == ("a", "b")
    assert choice == Choice(("a", "b"))


def test_json_object_specs_are_all_equal():
    assert JsonObject() == JsonObject() and hash(JsonObject()) == hash(JsonObject())

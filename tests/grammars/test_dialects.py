"""grammars/dialects.py: each dialect's schema read by $schema and spelled as draft 2020-12 before compiling."""

from __future__ import annotations

import json

import pytest

from conch.grammars import GrammarError, JsonSchema, validate
from conch.grammars.schema_check import prepared_schema

D4, D6, D7 = ("http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
              "http://json-schema.org/draft-07/schema")
D2019, D2020 = "https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema"


def _prepared(schema: dict) -> dict:
    return json.loads(prepared_schema(json.dumps(schema)))


@pytest.mark.parametrize("uri", [D4, D6, D7, D2019, D2020, "http://json-schema.org/draft-07/schema#",
                                 "https://json-schema.org/draft-04/schema", "http://example.com/my-meta"])
def test_every_dialect_is_read(uri):
    validate(JsonSchema.from_dict({"$schema": uri, "type": "object", "properties": {"a": {"type": "string"}}}))


def test_draft04_boolean_exclusive_bounds_become_numbers():
    schema = {"$schema": D4, "type": "integer", "minimum": 1, "exclusiveMinimum": True, "maximum": 5,
              "exclusiveMaximum": False}
    assert _prepared(schema) == {"type": "integer", "exclusiveMinimum": 1, "maximum": 5}


def test_draft04_id_and_definitions_with_refs_into_them():
    schema = {"$schema": D4, "id": "http://example.com/s", "definitions": {"a": {"type": "string"}},
              "properties": {"x": {"$ref": "http://example.com/s#/definitions/a"},
                             "definitions": {"$ref": "#/definitions/a"}}}
    assert _prepared(schema) == {"$defs": {"a": {"type": "string"}},
                                 "properties": {"x": {"$ref": "#/$defs/a"}, "definitions": {"$ref": "#/$defs/a"}}}


def test_tuple_items_become_prefix_items():
    for uri in (D4, D6, D7, D2019):
        schema = {"$schema": uri, "items": [{"type": "string"}, {"$ref": "#/items/0"}], "additionalItems": False}
        assert _prepared(schema) == {"prefixItems": [{"type": "string"}, {"$ref": "#/prefixItems/0"}], "items": False}


def test_additional_items_alone_means_nothing():
    assert _prepared({"$schema": D7, "items": {"type": "string"}, "additionalItems": False}) == {
        "items": {"type": "string"}}


def test_a_refusal_names_what_the_client_wrote():
    schema = {"$schema": D7, "definitions": {"node": {"type": "object", "dependencies": {"a": ["b"]}}},
              "properties": {"n": {"$ref": "#/definitions/node"}}}
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema.from_dict(schema))
    assert caught.value.keyword == "dependencies"
    assert caught.value.message == "unsupported JSON Schema keyword 'dependencies' at '/definitions/node'"
    d4 = {"$schema": D4, "type": "array", "items": [{"type": "string", "not": {"maxLength": 1}}]}
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema.from_dict(d4))
    assert "at '/items/0'" in caught.value.message and caught.value.keyword == "not"


def test_ref_siblings_are_dropped_up_to_draft07_only():
    schema = {"$ref": "#/definitions/a", "maxLength": 3, "definitions": {"a": {"type": "string"}}}
    assert _prepared({"$schema": D7, **schema}) == {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}}
    assert _prepared({"$schema": D2019, **schema})["maxLength"] == 3


def test_meta_schema_of_the_dialect_is_used():
    # A boolean exclusiveMaximum is valid draft-04 and invalid 2020-12.
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema.from_dict({"type": "number", "maximum": 1, "exclusiveMaximum": True}))
    assert "2020-12" in caught.value.message

"""The one output-constraint builder: each kind and alias, JSON text for JSON values, at most one constraint,
and errors that name the field as the face gave it."""
from __future__ import annotations

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.params import OutputConstraint, build_constraint, constraint_fields
from conch.grammars import Choice, Grammar, JsonObject, JsonSchema, Regex

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize("kind, value, spec", [
    ("json_schema", SCHEMA, JsonSchema.from_dict(SCHEMA)),
    ("json_schema", '{"type": "integer"}', JsonSchema.from_dict({"type": "integer"})),
    ("guided_json", SCHEMA, JsonSchema.from_dict(SCHEMA)),
    ("json", SCHEMA, JsonSchema.from_dict(SCHEMA)),
    ("json_object", True, JsonObject()), ("json_object", "true", JsonObject()),
    ("regex", "[a-z]+", Regex("[a-z]+")), ("guided_regex", "[0-9]", Regex("[0-9]")),
    ("choice", ["yes", "no"], Choice(("yes", "no"))), ("guided_choice", '["a"]', Choice(("a",))),
    ("grammar", 'start: "x"', Grammar('start: "x"')), ("guided_grammar", 'start: "y"', Grammar('start: "y"')),
])
def test_each_kind_and_alias(kind, value, spec):
    assert build_constraint([(kind, kind, value)]) == OutputConstraint(spec, kind)


def test_nothing_given_is_none():
    assert build_constraint([]) is None
    assert build_constraint([("regex", "regex", None), ("json_object", "json_object", False)]) is None


@pytest.mark.parametrize("kind, value, words", [
    ("json_schema", "{not json", "not valid JSON"), ("json_schema", [1], "JSON Schema object"),
    ("regex", 5, "a string"), ("choice", "yes", "not valid JSON"), ("choice", [1, 2], "list of strings"),
    ("json_object", "maybe", "a boolean"), ("regex", "(", "regex"), ("grammar", "start: ???", "grammar"),
    ("json_schema", {"type": "object", "propertyNames": {"maxLength": 3}}, "propertyNames"),
])
def test_bad_values_name_the_field(kind, value, words):
    with pytest.raises(InvalidRequest, match=words) as err:
        build_constraint([(f"x.{kind}", kind, value)])
    assert err.value.param == f"x.{kind}"


def test_at_most_one():
    with pytest.raises(InvalidRequest, match="only one") as err:
        build_constraint([("regex", "regex", "a"), ("guided_choice", "guided_choice", ["a"])])
    assert err.value.param == "regex"                   # the second by name, whatever the order given


def test_constraint_fields_split_a_flat_map():
    fields, rest = constraint_fields({"regex": "a+", "temperature": 0, "guided_json": None})
    assert fields == [("regex", "regex", "a+"), ("guided_json", "guided_json", None)] and rest == {"temperature": 0}

"""grammars/validate.py: every refusal is a GrammarError, up front, naming the keyword."""

from __future__ import annotations

import importlib
import json

import pytest

from conch.grammars import Choice, Grammar, GrammarError, JsonObject, JsonSchema, Regex, validate
from conch.grammars.cache import LRUCache
from conch.grammars.lowering import lower
from conch.grammars.schema_check import prepared_schema

from .conftest import LIBRARIES
from .schemas import SCHEMAS

validate_module = importlib.import_module("conch.grammars.validate")   # the package's `validate` is the function

UNSUPPORTED = {
    "not": {"not": {"type": "string"}},
    "if": {"if": {"type": "string"}, "then": {"maxLength": 3}},
    "uniqueItems": {"type": "array", "uniqueItems": True},
    "contains": {"type": "array", "contains": {"type": "integer"}},
    "minProperties": {"type": "object", "minProperties": 1},
    "maxProperties": {"type": "object", "maxProperties": 2},
    "propertyNames": {"type": "object", "propertyNames": {"maxLength": 3}},
    "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
    "unevaluatedProperties": {"type": "object", "unevaluatedProperties": False},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
    "unevaluatedItems": {"type": "array", "unevaluatedItems": False},
}

# Not validation keywords of any dialect, or no-ops: ignored, never a 400 (issue 13).
IGNORED = {
    "vendor extension": {"x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]},
    "annotations": {"title": "T", "description": "d", "$comment": "c", "examples": [1], "default": 1,
                    "deprecated": True, "readOnly": True, "writeOnly": False, "contentMediaType": "text/plain",
                    "contentEncoding": "base64", "$anchor": "here"},
    "typos": {"readonly": True, "self": {"href": "x"}, "links": [], "_format": "x", "_uniqueItems": True,
              "OneOf": [{"type": "string"}]},
    "unknown format": {"format": "int64"},
    "no-op values": {"uniqueItems": False, "minProperties": 0, "then": {"maxLength": 1}},
}


def _nested(inner: dict) -> dict:
    """`inner` deep inside properties, items, anyOf and $defs, to prove the walk goes everywhere."""
    return {
        "$defs": {"leaf": {"anyOf": [{"type": "null"}, inner]}},
        "type": "object",
        "properties": {"list": {"type": "array", "items": {"$ref": "#/$defs/leaf"}}},
    }


@pytest.mark.parametrize("keyword", sorted(UNSUPPORTED))
def test_unsupported_keyword_is_named(keyword):
    for schema in (UNSUPPORTED[keyword], _nested(UNSUPPORTED[keyword])):
        with pytest.raises(GrammarError) as caught:
            validate(JsonSchema.from_dict(schema))
        assert caught.value.keyword == keyword
        assert f"unsupported JSON Schema keyword '{keyword}'" in caught.value.message


@pytest.mark.parametrize("name", sorted(IGNORED))
def test_unknown_keywords_annotations_and_formats_are_ignored(name):
    for schema in ({"type": "string", **IGNORED[name]}, _nested({"type": "string", **IGNORED[name]})):
        validate(JsonSchema.from_dict(schema))
        lowered = lower(JsonSchema.from_dict(schema)).as_dict()
        assert not set(json.dumps(lowered).split('"')) & set(IGNORED[name]), "what is ignored never reaches a library"


def test_keyword_of_another_dialect_is_ignored():
    """`const` is not a draft-04 keyword: a draft-04 validator ignores it, and so does Conch."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "string", "const": "x", "maxLength": 2}
    assert lower(JsonSchema.from_dict(schema)).as_dict() == {"type": "string", "maxLength": 2}


def test_property_named_like_a_keyword_is_fine():
    validate(JsonSchema.from_dict({"type": "object", "properties": {"not": {"type": "integer"}, "if": {}}}))


@pytest.mark.parametrize(
    "text, keyword",
    [
        ("{not json", None),
        ("[1, 2]", None),
        ('{"type": "strin"}', "type"),
        ('{"type": "string", "minLength": -1}', "minLength"),
        ('{"type": "object", "required": "a"}', "required"),
        ('{"type": "string", "pattern": "a("}', "pattern"),
    ],
)
def test_malformed_schema_is_refused(text, keyword):
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema(text))
    assert caught.value.keyword == keyword


@pytest.mark.parametrize(
    "schema, keyword",
    [
        ({"$ref": "https://example.com/schema.json"}, "$ref"),
        ({"$ref": "#/$defs/missing"}, "$ref"),
        ({"type": "string", "pattern": "(?=a)b"}, "pattern"),
        ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "string"}, "$schema"),
        ({"type": "object", "properties": {"a": {"$id": "inner", "items": {"$ref": "#"}}}}, "$id"),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf"),  # branches overlap: not provable
        ({"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["a", "b"]}]}, "oneOf"),
        ({"oneOf": [{"type": "string"}, {"type": "string", "format": "date"}]}, "oneOf"),
        ({"oneOf": [{"type": "string"}, {"required": ["a"]}]}, "oneOf"),  # every string matches both
        ({"$ref": "#"}, "$ref"),  # no finite instance: its grammar would allow no token at all
        ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "$ref"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "anyOf": [{"$ref": "#/$defs/a"}]}, "$ref"),
    ],
)
def test_schema_outside_what_is_enforced_is_refused(schema, keyword):
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema.from_dict(schema))
    assert caught.value.keyword == keyword


def test_nested_id_without_refs_is_ignored():
    validate(JsonSchema.from_dict({"type": "object", "properties": {"a": {"$id": "inner", "type": "string"}}}))


def test_unused_definitions_are_not_checked():
    """A definition no $ref reaches constrains nothing, so what it uses is never refused."""
    schema = {"$defs": {"unused": {"type": "array", "uniqueItems": True}}, "type": "string"}
    assert lower(JsonSchema.from_dict(schema)).as_dict() == {"type": "string", "maxLength": 256}


@pytest.mark.parametrize(
    "spec",
    [Regex("a("), Regex("(?<=x)y"), Regex(r"(a)\1"), Choice(()), Choice(("a", "")), Grammar(""), Grammar("start: nope"),
     Grammar('start: "<call>" %json{"type": "object", "not": {}} "</call>"'), Grammar("start: %json{oops")],
)
def test_bad_regex_choice_and_grammar_are_refused(spec):
    with pytest.raises(GrammarError):
        validate(spec)


def test_inline_schema_keyword_is_named():
    with pytest.raises(GrammarError) as caught:
        validate(Grammar('start: "<tool_call>" %json{"type": "object", "propertyNames": {}} "</tool_call>"'))
    assert caught.value.keyword == "propertyNames"


@pytest.mark.parametrize(
    "spec",
    [JsonObject(), Regex(r"\d{3}-[a-z]+"), Choice(("yes", "no")),
     Grammar('start: "<tool_call>" %json{"type": "object", "properties": {"x": {"type": "integer"}}} "</tool_call>"')],
)
def test_good_specs_pass(spec):
    validate(spec)


@pytest.mark.parametrize("library", LIBRARIES)
def test_validate_names_library_limits(library):
    pattern_properties = JsonSchema('{"type":"object","patternProperties":{"^x_":{"type":"integer"}}}')
    refusals = {"outlines": [Grammar('start: "a"'), JsonSchema('{"type":"integer","minimum":0}'), pattern_properties],
                "xgrammar": [JsonSchema('{"allOf":[{"type":"string"},{"maxLength":3}]}'), pattern_properties]}
    for spec in refusals.get(library, []):
        with pytest.raises(GrammarError):
            validate(spec, library)


def test_pattern_properties_are_served_by_llguidance_with_their_regexes_checked():
    validate(JsonSchema('{"type":"object","patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false}'))
    with pytest.raises(GrammarError) as caught:
        validate(JsonSchema('{"type":"object","patternProperties":{"(?<=a)b":{}}}'))
    assert caught.value.keyword == "patternProperties"


def test_unknown_library_is_a_config_error():
    with pytest.raises(ValueError):
        validate(JsonObject(), "no-such-library")


def test_validate_needs_no_tokenizer_and_compiles_nothing(monkeypatch):
    """What keeps validate cheap, asserted without a clock: it runs a library's class-level check, never
    builds a library over a tokenizer nor compiles (a library's __init__ takes the tokenizer)."""
    checked = []
    library_class = validate_module.library_class

    def refusing_class(name):
        library = library_class(name)

        class Refusing(library):
            def __init__(self, *args, **kwargs):
                raise AssertionError("validate built a library over a tokenizer")

            @classmethod
            def check(cls, spec, bounds):
                checked.append(spec)
                return library.check(spec, bounds)

        return Refusing

    prepared_schema.cache_clear()
    validate_module._PASSED.clear()
    monkeypatch.setattr(validate_module, "library_class", refusing_class)
    for case in SCHEMAS:
        validate(JsonSchema.from_dict(case.schema))
    assert len(checked) >= len({json.dumps(case.schema, sort_keys=True) for case in SCHEMAS})


@pytest.fixture
def counted(monkeypatch):
    """The specs validate hands to a library's check (the costly part: ~0.2 ms a small schema with
    llguidance); the memo of passed specs emptied."""
    calls = []
    library_class = validate_module.library_class

    class Counting:
        def __init__(self, name):
            self.inner = library_class(name)

        def check(self, spec, bounds):
            calls.append(spec)
            return self.inner.check(spec, bounds)

    monkeypatch.setattr(validate_module, "library_class", Counting)
    validate_module._PASSED.clear()
    return calls


def test_a_spec_that_passed_is_not_checked_again(counted):
    tool = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    for _ in range(3):
        validate(JsonSchema.from_dict(tool))
    validate(JsonSchema.from_dict(tool), "outlines")       # another library is another question
    assert len(counted) == 2


def test_a_refused_spec_is_refused_every_time(counted):
    overlapping = {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}   # the library refuses it
    for _ in range(2):
        with pytest.raises(GrammarError, match="oneOf"):
            validate(JsonSchema.from_dict(overlapping))
    assert len(counted) == 2


def test_a_long_spec_is_checked_every_time(counted, monkeypatch):
    monkeypatch.setattr(validate_module, "_REMEMBERED_TEXT", 10)
    for _ in range(2):
        validate(JsonSchema.from_dict({"type": "string", "description": "longer than ten characters"}))
    assert len(counted) == 2


def test_the_memo_forgets_its_least_recent_spec(counted, monkeypatch):
    monkeypatch.setattr(validate_module, "_PASSED", LRUCache(2))
    a, b, c = (JsonSchema.from_dict({"type": "string", "maxLength": n}) for n in (1, 2, 3))
    for spec in (a, b, a, c, a, b):                        # c evicts b (a was used since); b is checked again
        validate(spec)
    assert counted == [a, b, c, b]

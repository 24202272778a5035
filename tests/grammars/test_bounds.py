"""grammars/bounds.py and generation.py: closed objects, bounded strings, arrays and numbers, for generation only.

Random walks (a model that picks any allowed token) must end within a few tokens under small bounds,
and every output must still validate against the user's own schema, with no key twice.
"""

from __future__ import annotations

import json

import pytest

from conch.grammars import GenerationBounds, GrammarCompiler, JsonSchema
from conch.grammars.libraries import library_class
from conch.grammars.lowering import lower

from .checking import parse_unique, validate_output
from .conftest import load_info
from .drive import random_walk

SMALL = GenerationBounds(max_string_length=6, max_items=2, max_integer_digits=3, max_fraction_digits=2)

# LangChain's with_structured_output(method="function_calling") sends this shape: no additionalProperties.
LANGCHAIN_STYLE = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}, "area": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["city", "population"],
}


def _schema_for(library: str) -> dict:
    """LANGCHAIN_STYLE without the parts a library leaves unbounded (outlines: numbers)."""
    bounds = library_class(library).bounds_for(SMALL)
    if bounds.max_integer_digits is None:
        return {**LANGCHAIN_STYLE, "properties": {k: v for k, v in LANGCHAIN_STYLE["properties"].items()
                                                  if v["type"] not in ("integer", "number")}, "required": ["city"]}
    return LANGCHAIN_STYLE


def test_open_object_is_closed_and_bounded_for_generation():
    assert lower(JsonSchema.from_dict(LANGCHAIN_STYLE), SMALL).as_dict() == {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 6},
                       "population": {"type": "integer", "minimum": -999, "maximum": 999},
                       "area": {"type": "number", "minimum": -999, "maximum": 999, "multipleOf": 0.01},
                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "schema, expected",
    [
        ({"type": "integer", "minimum": 5000}, {"type": "integer", "minimum": 5000, "maximum": 5999}),
        ({"type": "integer", "exclusiveMaximum": -2000}, {"type": "integer", "exclusiveMaximum": -2000,
                                                         "minimum": -2999}),
        ({"type": "string", "minLength": 10}, {"type": "string", "minLength": 10, "maxLength": 10}),
        ({"type": "string", "format": "email"}, {"type": "string", "format": "email"}),
        ({"type": "array", "minItems": 4}, {"type": "array", "minItems": 4, "maxItems": 4}),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True},
         {"type": "object", "properties": {"a": {}}, "additionalProperties": True}),
        ({"type": "object"}, {"type": "object", "maxProperties": 16}),  # json_object mode: any object, 16 keys
    ],
)
def test_bounds_never_undercut_the_schema(schema, expected):
    assert lower(JsonSchema.from_dict(schema), SMALL).as_dict() == expected


def test_undeclared_keys_are_bounded_where_llguidance_counts_keys():
    bounds = GenerationBounds(max_extra_keys=2)
    extra = {"type": "object", "properties": {"a": {"enum": [1]}}, "required": ["a"],
             "additionalProperties": {"enum": [0]}}
    assert lower(JsonSchema.from_dict(extra), bounds).as_dict()["maxProperties"] == 3
    optional = {**extra, "required": []}                     # llguidance refuses maxProperties here
    assert "maxProperties" not in lower(JsonSchema.from_dict(optional), bounds).as_dict()
    info = load_info()
    grammar = GrammarCompiler(info, "llguidance", bounds=bounds).compile(JsonSchema.from_dict(extra))
    matcher = grammar.matcher()
    text = '{"a":1,"k":0,"j":0,"l":0}'                        # a model adding undeclared keys
    accepted = ""
    for token in info.hf_tokenizer.encode(text, add_special_tokens=False):
        if not matcher.accept(token):
            break
        accepted += info.hf_tokenizer.decode([token])
    assert accepted.startswith('{"a":1,"k":0,"j":0') and not accepted.startswith('{"a":1,"k":0,"j":0,')


def test_merged_objects_stay_open():
    """Closing one part of an allOf would forbid the other part's properties."""
    schema = {"$defs": {"base": {"type": "object", "properties": {"a": {"enum": [1]}}}},
              "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"b": {"enum": [2]}}, "required": ["b"]}]}
    lowered = json.dumps(lower(JsonSchema.from_dict(schema), SMALL).as_dict())
    assert "additionalProperties" not in lowered


def test_bounds_can_be_turned_off():
    off = GenerationBounds(max_string_length=None, max_items=None, max_integer_digits=None,
                           max_fraction_digits=None, close_objects=False)
    assert lower(JsonSchema.from_dict(LANGCHAIN_STYLE), off).as_dict() == LANGCHAIN_STYLE


@pytest.mark.parametrize("data", [{"max_items": 0}, {"max_string_length": "long"}, {"nope": 1},
                                  {"close_objects": 1}])
def test_bad_bounds_are_refused(data):
    with pytest.raises(ValueError):
        GenerationBounds.from_mapping(data)


def test_random_walks_end_with_only_declared_keys_once(library):
    schema = _schema_for(library)
    grammar = GrammarCompiler(load_info(), library, bounds=SMALL).compile(JsonSchema.from_dict(schema))
    for seed in range(4):
        walk = random_walk(grammar, load_info(), seed, max_steps=150)
        assert walk.finished, f"did not end within 150 tokens: {walk.text[:200]!r}"
        validate_output(schema, walk.text)
        value = parse_unique(walk.text)
        assert set(value) <= set(schema["properties"])


def test_model_config_sets_the_bounds():
    from conch.engine.errors import InvalidRequest
    from conch.engine.repository.config import ModelConfig

    config = ModelConfig.from_mapping("m", {"grammar_bounds": {"max_string_length": 32, "max_items": None}})
    assert config.grammar_bounds == GenerationBounds(max_string_length=32, max_items=None)
    assert ModelConfig.from_mapping("m", {}).grammar_bounds == GenerationBounds()
    with pytest.raises(InvalidRequest):
        ModelConfig.from_mapping("m", {"grammar_bounds": {"max_digits": 3}})


def _depth(value) -> int:
    return 1 + max((_depth(child) for child in value["children"]), default=0)


def test_recursive_refs_are_unrolled_so_a_tree_always_closes():
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name", "children"]}
    bounds = GenerationBounds(max_string_length=3, max_items=2, max_ref_depth=2)
    grammar = GrammarCompiler(load_info(), "llguidance", bounds=bounds).compile(JsonSchema.from_dict(tree))
    values = []
    for seed in range(8):
        walk = random_walk(grammar, load_info(), seed, max_steps=400)
        assert walk.finished, f"did not close within 400 tokens: {walk.text[:200]!r}"
        values.append(validate_output(tree, walk.text))
    assert max(_depth(v) for v in values) <= 3                     # the root and two levels of $ref
    matcher, info = grammar.matcher(), load_info()
    too_deep = '{"name":"a","children":[{"name":"b","children":[{"name":"c","children":[{'
    ids = info.hf_tokenizer.encode(too_deep, add_special_tokens=False)
    assert not all(matcher.accept(token) for token in ids)        # a fourth level is refused
    assert "conch-depth" not in json.dumps(lower(JsonSchema.from_dict(tree), GenerationBounds(max_ref_depth=None))
                                           .as_dict())

"""The small pieces: regex_check.py, schema_walk.py, lowering.py."""

from __future__ import annotations

import re

import pytest

from conch.grammars import GrammarError
from conch.grammars.lowering import choice_regex, escape_regex
from conch.grammars.regex_check import check_regex, may_produce
from conch.grammars.schema_walk import is_recursive, iter_nodes, resolve_ref

JSON_UNSAFE = '"\\' + "".join(chr(c) for c in range(32))


@pytest.mark.parametrize("pattern", ["(?=a)", "(?!a)b", "(?<=a)b", r"(a)\1", "(?P<x>a)(?P=x)", "(?>a)", "a++"])
def test_check_regex_refuses_non_regular_constructs(pattern):
    with pytest.raises(GrammarError):
        check_regex(pattern)


@pytest.mark.parametrize(
    "pattern, unsafe",
    [("[a-z]+", False), (r"^\d{3}-\w+$", False), (".*", True), (r"\s", True), ("[^a]", True), ('"', True),
     ("[ -~]", True)],
)
def test_may_produce_is_conservative(pattern, unsafe):
    assert may_produce(pattern, JSON_UNSAFE) is unsafe


@pytest.mark.parametrize("text", ["a b", "q\"uote", "back\\slash", "br[ack]et", "(x)|{y}", "dot.*+?^$", "naïve ✓"])
def test_escape_regex_matches_the_literal(text):
    assert re.fullmatch(escape_regex(text), text)
    assert re.fullmatch(choice_regex((text, "other")), text)


def test_iter_nodes_walks_subschemas_only():
    schema = {"properties": {"a": {"items": {"type": "string"}}}, "enum": [{"properties": {}}],
              "$defs": {"d": {"anyOf": [{"type": "null"}]}}}
    paths = [path for path, _ in iter_nodes(schema)]
    assert paths == ["", "/properties/a", "/properties/a/items", "/$defs/d", "/$defs/d/anyOf/0"]


def test_resolve_ref_and_recursion():
    schema = {"$defs": {"a/b": {"type": "string"}, "node": {"properties": {"next": {"$ref": "#/$defs/node"}}}}}
    assert resolve_ref(schema, "#/$defs/a~1b") == {"type": "string"}
    assert resolve_ref(schema, "#") is schema
    assert is_recursive(schema)
    assert not is_recursive({"$defs": {"x": {}}, "properties": {"a": {"$ref": "#/$defs/x"}}})
    assert is_recursive({"properties": {"self": {"$ref": "#"}}})

"""grammars/compiler.py over every installed library: cached, validated, async."""

from __future__ import annotations

import importlib
import types

import pytest

from conch.grammars import GrammarError, JsonObject, JsonSchema, Regex


def test_cache_hit_returns_the_same_object(compiler):
    spec = JsonSchema('{"type":"object","properties":{"cached":{"type":"boolean"}},"required":["cached"]}')
    first = compiler.compile(spec)
    before = compiler.cache_stats()
    assert compiler.compile(JsonSchema.from_dict(first.spec.as_dict())) is first  # equal spec, other instance
    after = compiler.cache_stats()
    assert after.hits == before.hits + 1 and after.misses == before.misses


def test_compiled_grammar_records_its_origin(compiler, info, library):
    grammar = compiler.compile(Regex("[0-9]{4}"))
    assert (grammar.library, grammar.tokenizer_fingerprint) == (library, info.fingerprint)
    assert grammar.matcher() is not grammar.matcher()  # one per sequence


def test_compile_seconds_is_the_wall_time_of_the_library_s_build(compiler, monkeypatch):
    ticks = iter([100.0, 100.25])            # the build's start and end, on a clock only the build reads
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks))
    monkeypatch.setattr(importlib.import_module("conch.grammars.libraries.base"), "time", clock)
    grammar = compiler.compile(Regex("[0-9]{3}-seconds"))     # a spec no other test compiles: a cache miss
    assert grammar.compile_seconds == 0.25


def test_compile_refuses_what_validate_refuses(compiler):
    with pytest.raises(GrammarError) as caught:
        compiler.compile(JsonSchema('{"type":"object","propertyNames":{"maxLength":3}}'))
    assert caught.value.keyword == "propertyNames"


def test_compile_refuses_what_the_library_refuses(compiler, monkeypatch):
    """Overlapping oneOf branches pass the neutral checks and are refused by llguidance's converter: by its
    check where the library's build would not refuse them, by the build itself for llguidance (not asked
    twice: its check is never called while compiling)."""
    from conch.grammars.libraries.llguidance import LLGuidanceLibrary

    def not_called(cls, spec):
        raise AssertionError("llguidance's check called while compiling for llguidance")

    if compiler.library == "llguidance":
        monkeypatch.setattr(LLGuidanceLibrary, "check_lowered", classmethod(not_called))
    with pytest.raises(GrammarError) as caught:
        compiler.compile(JsonSchema.from_dict({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}))
    assert caught.value.keyword == "oneOf"


def test_failures_are_not_cached(compiler):
    spec = Regex("a(")
    for _ in range(2):
        with pytest.raises(GrammarError):
            compiler.compile(spec)


async def test_compile_async_runs_off_the_loop(compiler):
    grammar = await compiler.compile_async(Regex("[a-f]{8}"))
    assert grammar is compiler.compile(Regex("[a-f]{8}"))


def test_equivalent_specs_share_one_entry(compiler):
    assert compiler.compile(JsonObject()) is compiler.compile(JsonSchema('{"type": "object"}'))


def test_llguidance_enforces_pattern_properties():
    import json

    import jsonschema

    from .conftest import load_compiler, load_info
    from .drive import random_walk

    schema = {"type": "object", "properties": {"id": {"type": "integer"}},
              "patternProperties": {"^x_[a-z]{1,4}$": {"type": "boolean"}}, "additionalProperties": False}
    grammar, info = load_compiler("llguidance").compile(JsonSchema.from_dict(schema)), load_info()
    walks = [random_walk(grammar, info, seed, 200) for seed in range(12)]
    values = [json.loads(w.text) for w in walks if w.finished]
    assert len(values) >= 6 and any(k.startswith("x_") for v in values for k in v)
    for value in values:
        jsonschema.validate(value, schema)

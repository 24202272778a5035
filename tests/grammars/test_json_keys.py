"""grammars/json_keys.py: beside a JSON grammar, no object repeats a key and an open object's undeclared keys
are bounded, so a model in a loop closes the object instead of writing `"k":1,"k":1,...` until max_tokens.

The "model" here is a toy token stream: it wants to write one text forever and, where the mask refuses its
token, takes a seeded random allowed one instead (as a sampler would take the next best).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from conch.grammars import GenerationBounds, GrammarCompiler, JsonObject, JsonSchema, allocate_bitmask

from .checking import parse_unique
from .conftest import load_info
from .drive import allowed_ids

LIMIT = 3
BOUNDS = GenerationBounds(max_extra_keys=LIMIT, max_string_length=8, max_items=2, max_integer_digits=2,
                          max_fraction_digits=1)
# An open object whose declared properties are not all required: llguidance cannot count its keys.
OPEN = {"type": "object", "properties": {"scale": {"enum": [1, 2]}, "name": {"enum": ["n"]}},
        "required": ["scale"], "additionalProperties": {"enum": [1, 2, 3]}}
NESTED = {"type": "object", "properties": {"inner": OPEN}, "required": ["inner"], "additionalProperties": OPEN}


def _compiler(library: str, bounds: GenerationBounds = BOUNDS) -> GrammarCompiler:
    return GrammarCompiler(load_info(), library, bounds=bounds)


def _looping_model(grammar, wanted: str, seed: int, max_steps: int = 400) -> str:
    """Feed the tokens of `wanted` repeated without end; where the mask refuses one, a random allowed token."""
    info, rng = load_info(), random.Random(seed)
    tokens = info.hf_tokenizer.encode(wanted, add_special_tokens=False)
    matcher, bitmask = grammar.matcher(), allocate_bitmask(1, info.vocab_size)
    for step in range(max_steps):
        if matcher.is_finished():
            break
        matcher.fill_bitmask(bitmask, 0)
        allowed = allowed_ids(bitmask[0].numpy(), info.vocab_size)
        token = tokens[step % len(tokens)]
        if not allowed[token]:
            choices = np.flatnonzero(allowed)
            assert len(choices) > 0, "an unfinished matcher must allow some token"
            token = int(choices[rng.randrange(len(choices))])
        assert matcher.accept(token), f"token {token} was in the mask but refused"
    assert matcher.is_finished(), f"the loop did not end within {max_steps} tokens"
    eos = set(info.eos_token_ids)
    return b"".join(info.token_bytes[t] for t in matcher.tokens if t not in eos).decode()


def _undeclared(value, declared: set[str]) -> list[int]:
    """The number of undeclared keys of every object in `value`."""
    if isinstance(value, list):
        return [n for item in value for n in _undeclared(item, declared)]
    if not isinstance(value, dict):
        return []
    return [len(set(value) - declared), *(n for item in value.values() for n in _undeclared(item, declared))]


@pytest.mark.parametrize("schema, wanted", [
    (OPEN, '{"scale": 1, "k": 1, "k": 1, "k": 1, "k": 1'),
    (NESTED, '{"inner": {"scale": 1, "k": 1, "k": 1}, "k": {"scale": 2, "j": 3, "j": 3}, "k": '),
])
def test_a_looping_model_closes_the_object_with_no_key_twice(library, schema, wanted):
    grammar = _compiler(library).compile(JsonSchema.from_dict(schema))
    for seed in range(3):
        value = parse_unique(_looping_model(grammar, wanted, seed))
        assert max(_undeclared(value, {"scale", "name", "inner"})) <= LIMIT


def test_json_object_mode_repeats_no_key():
    grammar = _compiler("llguidance").compile(JsonObject())
    for seed in range(3):
        value = parse_unique(_looping_model(grammar, '{"a": {"a": [1, {"a": 1}], "a": 2', seed))
        assert len(value) <= LIMIT


def _accepted(matcher, text: str) -> str:
    """The longest prefix of `text` the matcher accepts, fed one single-character token at a time."""
    tokenizer, done = load_info().hf_tokenizer, ""
    for char in text:
        ids = tokenizer.encode(char, add_special_tokens=False)
        assert len(ids) == 1, char
        if not matcher.accept(ids[0]):
            break
        done += char
    return done


# Any object or array; an optional property keeps llguidance from counting keys (no maxProperties), so the
# bound on undeclared keys below is the check's alone.
ANY = {"type": ["object", "array"], "properties": {"z": {"enum": [1]}}, "additionalProperties": True}


@pytest.mark.parametrize("text, refused_at", [
    ('{"x": {"k": 1}, "k": 2, "k": 3}', '{"x": {"k": 1}, "k": 2, "k'),         # each object its own keys
    ('[{"k": 1}, {"k": 2, "k": 3}]', '[{"k": 1}, {"k": 2, "k'),
    ('{"s": "\\"s\\": 1, \\"s\\"", "s": 1}', '{"s": "\\"s\\": 1, \\"s\\"", "s'),  # keys in a string are text
    ('{"k": [1, 2], "ka": 1, "k": 1}', '{"k": [1, 2], "ka": 1, "k'),
    ('{"a": 1, "b": 2, "c": 3, "d": 4}', '{"a": 1, "b": 2, "c": 3'),            # the fourth undeclared key
])
def test_the_check_follows_the_json_structure(text, refused_at):
    matcher = _compiler("llguidance").compile(JsonSchema.from_dict(ANY)).matcher()
    assert _accepted(matcher, text) == refused_at


def test_a_duplicate_key_is_masked_and_rollback_forgets_keys():
    info = load_info()
    matcher = _compiler("llguidance").compile(JsonSchema.from_dict(ANY)).matcher()
    assert _accepted(matcher, '{"k": 1, "k') == '{"k": 1, "k'
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    allowed = allowed_ids(bitmask[0].numpy(), info.vocab_size)
    closing = [i for i, raw in enumerate(info.token_bytes) if raw.startswith(b'"') and allowed[i]]
    assert closing == [], [info.token_bytes[i] for i in closing]           # no token closes the key "k" again
    matcher.rollback(4)                                                     # back to '{"k": 1'
    assert _accepted(matcher, '}') == '}' and matcher.is_finished()
    matcher.rollback(matcher.num_tokens)
    assert _accepted(matcher, '{"k": 1, "j": 1}') == '{"k": 1, "j": 1}'


def test_no_bound_but_still_no_key_twice():
    bounds = GenerationBounds(max_extra_keys=None)
    matcher = _compiler("llguidance", bounds).compile(JsonSchema.from_dict(ANY)).matcher()
    text = "{" + ", ".join(f'"k{i}": 1' for i in range(40)) + ', "k0": 1}'
    assert _accepted(matcher, text) == text[: text.rindex('"k0"') + 3]


def test_a_grammar_that_allows_only_a_duplicate_keeps_its_row():
    """Only keys `k` allowed, and the object may go on: after `{"k":1,"` no token but a duplicate fits, so
    the check leaves the grammar's row (an empty row would leave the sampler nothing to pick)."""
    schema = {"type": "object", "patternProperties": {"^k$": {"enum": [1]}}, "additionalProperties": False}
    info = load_info()
    matcher = _compiler("llguidance").compile(JsonSchema.from_dict(schema)).matcher()
    assert _accepted(matcher, '{"k":1,"k') == '{"k":1,"k'
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    assert bitmask.any()
    assert _accepted(matcher, '"') == '"'


def test_a_key_grows_no_longer_than_the_string_bound():
    """A looping model can write one endless key (`"id:1,name:x,age:12,age:12,...`); past max_string_length
    bytes only a token that closes the key is left."""
    info = load_info()
    matcher = _compiler("llguidance").compile(JsonSchema.from_dict(ANY)).matcher()
    grammar = _compiler("llguidance").compile(JsonSchema.from_dict(ANY))
    text = _looping_model(grammar, '{"age:12,age:12,age:12,age:12,age:12,age:12,age:12', seed=0)
    value = parse_unique(text)
    assert all(len(key) <= BOUNDS.max_string_length for key in value), text
    assert _accepted(matcher, '{"abcdefgh') == '{"abcdefgh'
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    allowed = np.flatnonzero(allowed_ids(bitmask[0].numpy(), info.vocab_size))
    assert allowed.size > 0 and all(info.token_bytes[i].startswith(b'"') for i in allowed)

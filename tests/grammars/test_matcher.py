"""grammars/matcher.py over every installed library: EOS rules, exact masks, rollback, outputs."""

from __future__ import annotations

import json
import random
import re

import pytest

from conch.grammars import Choice, Grammar, GrammarError, JsonSchema, Regex, allocate_bitmask
from conch.grammars.bitmask import allowed_tokens

from .drive import random_walk

PERSON = JsonSchema.from_dict({"type": "object", "properties": {"name": {"enum": ["ann", "bob"]},
                                                              "ok": {"type": "boolean"}},
                               "required": ["name", "ok"], "additionalProperties": False})
CODE = Regex(r"[a-z]{2,5}-[0-9]{1,3}")
OPTIONS = Choice(("yes", "no", "maybe so", 'a "quote"', "br[ack]et.*", "naïve ✓"))


def _mask(matcher, info) -> set[int]:
    bitmask = allocate_bitmask(1, info.vocab_size)
    matcher.fill_bitmask(bitmask, 0)
    return set(allowed_tokens(bitmask, 0).tolist())


def _encode(hf_tokenizer, text: str) -> list[int]:
    return hf_tokenizer.encode(text, add_special_tokens=False)


def test_eos_only_where_the_grammar_accepts(compiler, info, hf_tokenizer):
    matcher = compiler.compile(PERSON).matcher()
    eos = info.eos_token_ids[0]
    assert eos not in _mask(matcher, info) and not matcher.can_finish()
    assert not matcher.accept(eos) and matcher.num_tokens == 0
    for token in _encode(hf_tokenizer, '{"name": "ann", "ok": true}'):
        assert matcher.accept(token)
    assert matcher.is_finished() and matcher.can_finish()  # complete: nothing but EOS can follow
    assert _mask(matcher, info) == {eos}
    assert matcher.accept(eos) and matcher.is_finished() and not matcher.can_finish()
    assert not matcher.accept(eos) and not matcher.accept(_encode(hf_tokenizer, " ")[0])
    assert _mask(matcher, info) == {eos}


def test_accepting_is_not_finished_while_more_may_follow(compiler, hf_tokenizer):
    matcher = compiler.compile(CODE).matcher()
    for token in _encode(hf_tokenizer, "ab-1"):
        assert matcher.accept(token)
    assert matcher.can_finish() and not matcher.is_finished()


def test_special_tokens_are_never_allowed(compiler, info, hf_tokenizer):
    matcher = compiler.compile(JsonSchema('{"type":"object","properties":{"s":{"type":"string"}}}')).matcher()
    for token in _encode(hf_tokenizer, '{"s": "'):  # inside a free string: the widest mask there is
        assert matcher.accept(token)
    assert not (_mask(matcher, info) & info.special_token_ids)
    assert not any(matcher.accept(token) for token in info.banned_token_ids)


def test_mask_agrees_with_accept(compiler, info, hf_tokenizer):
    rng = random.Random(7)
    matcher = compiler.compile(PERSON).matcher()
    for prefix_token in [None] + _encode(hf_tokenizer, '{"name": "bob", "ok": f'):
        if prefix_token is not None:
            assert matcher.accept(prefix_token)
        allowed = _mask(matcher, info)
        for token in rng.sample(range(info.vocab_size), 60) + rng.sample(sorted(allowed), min(5, len(allowed))):
            accepted = matcher.accept(token)
            assert accepted == (token in allowed), token
            if accepted:
                matcher.rollback(1)
        assert _mask(matcher, info) == allowed  # refusals and rollbacks left no trace


def test_rollback_restores_state_including_eos(compiler, info, hf_tokenizer):
    matcher = compiler.compile(PERSON).matcher()
    tokens = _encode(hf_tokenizer, '{"name": "ann", "ok": false}')
    for token in tokens[:3]:
        matcher.accept(token)
    snapshot = _mask(matcher, info)
    for token in tokens[3:] + [info.eos_token_ids[0]]:
        assert matcher.accept(token)
    matcher.rollback(1)  # the EOS
    assert not matcher.tokens or matcher.tokens[-1] != info.eos_token_ids[0]
    assert matcher.can_finish()
    matcher.rollback(len(tokens) - 3)
    assert _mask(matcher, info) == snapshot and matcher.tokens == tuple(tokens[:3])
    with pytest.raises(ValueError):
        matcher.rollback(4)


def test_regex_outputs_match(compiler, info):
    grammar = compiler.compile(CODE)
    for seed in range(4):
        walk = random_walk(grammar, info, seed, 40)
        assert walk.finished and re.fullmatch(CODE.pattern, walk.text), walk.text


def test_choice_outputs_are_options_and_every_option_is_reachable(compiler, info, hf_tokenizer):
    grammar = compiler.compile(OPTIONS)
    for seed in range(4):
        walk = random_walk(grammar, info, seed, 40)
        assert walk.finished and walk.text in OPTIONS.options
    for option in OPTIONS.options:
        matcher = grammar.matcher()
        assert all(matcher.accept(token) for token in _encode(hf_tokenizer, option)), option
        assert matcher.can_finish()


TOOL_CALL = Grammar('start: "<tool_call>" %json{"type": "object", "properties": {"n": {"type": "integer", '
                   '"minimum": 0, "maximum": 9}}, "required": ["n"], "additionalProperties": false} "</tool_call>"')


def test_lark_grammar_with_inline_json(compiler, hf_tokenizer, library):
    if library == "outlines":
        with pytest.raises(GrammarError):
            compiler.compile(TOOL_CALL)
        return
    grammar = compiler.compile(TOOL_CALL)
    good = grammar.matcher()
    assert all(good.accept(t) for t in _encode(hf_tokenizer, '<tool_call>{"n": 7}</tool_call>')) and good.can_finish()
    bad = grammar.matcher()
    assert not all(bad.accept(t) for t in _encode(hf_tokenizer, '<tool_call>{"n": 12}</tool_call>'))


def test_inline_json_whitespace_is_bounded_with_llguidance(info):
    from .conftest import load_compiler

    walk = random_walk(load_compiler("llguidance").compile(TOOL_CALL), info, 0, 80)
    assert walk.finished and walk.text.startswith("<tool_call>") and walk.text.endswith("</tool_call>")
    assert 0 <= json.loads(walk.text[len("<tool_call>") : -len("</tool_call>")])["n"] <= 9


def test_alternatives_after_an_accepting_prefix(compiler, hf_tokenizer, library, request):
    if library == "outlines":  # outlines-core 0.2.14 drops edges out of accepting states
        request.applymarker(pytest.mark.xfail(strict=True, reason="outlines-core Index limitation"))
    matcher = compiler.compile(Regex("cat|category")).matcher()
    assert all(matcher.accept(token) for token in _encode(hf_tokenizer, "cat")) and matcher.can_finish()
    assert all(matcher.accept(token) for token in _encode(hf_tokenizer, "egory"))


def test_fill_refuses_a_bitmask_it_cannot_write(compiler, info):
    import torch

    matcher = compiler.compile(CODE).matcher()
    with pytest.raises(ValueError):
        matcher.fill_bitmask(torch.zeros((1, 10), dtype=torch.int32), 0)  # wrong width
    with pytest.raises(ValueError):
        matcher.fill_bitmask(allocate_bitmask(1, info.vocab_size).to(torch.int64), 0)

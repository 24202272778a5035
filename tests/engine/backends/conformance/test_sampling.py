"""Conformance: sampling, counts and limits. Every installed LLM backend gives the same answers to these."""
from __future__ import annotations

import pytest

from dataclasses import replace

from conch.engine.errors import ContextLengthExceeded
from tests.engine.backends.conformance.backends import CONTEXT, MODEL
from tests.engine.backends.conformance.drive import PROMPT, one, request, run


async def test_greedy_is_deterministic(engine):
    first = await one(engine, max_tokens=16)
    second = await one(engine, max_tokens=16)
    assert first.text and first.text == second.text and first.token_ids == second.token_ids


async def test_a_seed_reproduces_its_sample_and_another_seed_differs(engine):
    sampled = dict(max_tokens=16, temperature=1.0, ignore_eos=True)
    a = await one(engine, seed=11, **sampled)
    again = await one(engine, seed=11, **sampled)
    other = await one(engine, seed=12, **sampled)
    assert a.token_ids == again.token_ids and a.text == again.text
    assert a.token_ids != other.token_ids


async def test_n_choices_each_end_once_with_their_own_usage(engine):
    choices = await run(engine, request(n=3, temperature=0.8, seed=3, max_tokens=6, ignore_eos=True))
    assert [c.usage.completion_tokens for c in choices] == [6, 6, 6]
    assert all(c.finish_reason == "length" and len(c.token_ids) == 6 for c in choices)
    greedy = await run(engine, request(n=2, max_tokens=8))
    assert greedy[0].text == greedy[1].text


async def test_max_tokens_ends_with_length(engine):
    choice = await one(engine, max_tokens=5, ignore_eos=True)
    assert choice.finish_reason == "length"
    assert choice.usage.completion_tokens == len(choice.token_ids) == 5
    assert choice.usage.prompt_tokens > 0


def _long_prompt(engine, tokens: int) -> tuple[int, ...]:
    ids = engine.get(MODEL).tokenizer.encode(PROMPT)
    return tuple((ids * (tokens // len(ids) + 1))[:tokens])


async def test_generation_stops_at_the_context_length(engine):
    prompt = _long_prompt(engine, CONTEXT - 6)
    choice = await one(engine, prompt_token_ids=prompt, max_tokens=None, ignore_eos=True)
    assert choice.finish_reason == "length"
    assert choice.usage.prompt_tokens + choice.usage.completion_tokens == CONTEXT
    assert choice.usage.completion_tokens == 6


@pytest.mark.parametrize("prompt_tokens, max_tokens", [(CONTEXT - 6, 7), (CONTEXT, 1)])
async def test_a_request_past_the_context_is_refused(engine, prompt_tokens, max_tokens):
    with pytest.raises(ContextLengthExceeded, match="maximum context length"):
        await one(engine, prompt_token_ids=_long_prompt(engine, prompt_tokens), max_tokens=max_tokens)


async def test_max_tokens_as_a_ceiling_generates_what_the_context_leaves(engine):
    """The chat-like faces' reading (llama.cpp's, Anthropic's): max_tokens past the room is cut to it."""
    req = replace(request(prompt_token_ids=_long_prompt(engine, CONTEXT - 6), max_tokens=32000, ignore_eos=True,
                          min_tokens=20), max_tokens_ceiling=True)
    (choice,) = await run(engine, req)
    assert choice.finish_reason == "length"
    assert choice.usage.completion_tokens == 6 and choice.usage.prompt_tokens == CONTEXT - 6


async def test_logprobs_one_position_per_token_with_k_alternatives(engine):
    choice = await one(engine, max_tokens=6, logprobs=3, ignore_eos=True)
    assert len(choice.logprobs) == len(choice.token_ids) == 6
    for position, token in zip(choice.logprobs, choice.token_ids, strict=True):
        assert position.chosen.token_id == token and position.chosen.logprob <= 0.0
        assert len(position.top) == 3
        top = [t.logprob for t in position.top]
        assert top == sorted(top, reverse=True)
        assert position.top[0].token_id == token          # greedy picks the most likely token
    bare = await one(engine, max_tokens=4, logprobs=0, ignore_eos=True)
    assert len(bare.logprobs) == 4 and all(p.top == () for p in bare.logprobs)
    plain = await one(engine, max_tokens=4)
    assert plain.logprobs == []

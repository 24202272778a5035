"""/v1/chat/completions through a real server with the openai SDK and SmolLM2."""
from __future__ import annotations

import asyncio

from conch.engine.weights import DEFAULT_MODEL_ID

MODEL = DEFAULT_MODEL_ID
HI = [{"role": "user", "content": "Say hello."}]


def test_chat_sync(client):
    r = client.chat.completions.create(model=MODEL, messages=HI, max_tokens=8, temperature=0)
    choice = r.choices[0]
    assert r.object == "chat.completion" and r.model == MODEL
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


async def test_chat_async(aclient):
    r = await aclient.chat.completions.create(model=MODEL, messages=HI, max_tokens=6, temperature=0)
    assert r.choices[0].message.content


def test_stream_equals_non_stream_at_temperature_zero(client):
    kwargs = dict(model=MODEL, messages=HI, max_tokens=12, temperature=0)
    whole = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert all(c.usage is None for c in chunks)


def test_include_usage_sends_one_final_usage_chunk(client):
    chunks = list(client.chat.completions.create(model=MODEL, messages=HI, max_tokens=5, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1] and chunks[-1].choices == []
    streamed = sum(1 for c in chunks if c.choices and c.choices[0].delta.content)
    assert 0 < chunks[-1].usage.completion_tokens <= 5 and streamed <= chunks[-1].usage.completion_tokens


def test_stop_string_is_not_in_the_output(client):
    messages = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
    free = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=30, temperature=0)
    text = free.choices[0].message.content
    assert "4" in text, text
    stopped = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=30, temperature=0, stop=["4"])
    assert stopped.choices[0].message.content == text[: text.index("4")]
    assert stopped.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=30, temperature=0,
                                              stop=["4"], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text[: text.index("4")]


def test_n_two_gives_two_choices(client):
    r = client.chat.completions.create(model=MODEL, messages=HI, max_tokens=6, temperature=1.0, n=2, seed=3,
                                       extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert r.usage.completion_tokens == 12          # prompt counted once, completions summed
    assert all(c.message.content for c in r.choices)
    assert r.choices[0].message.content != r.choices[1].message.content   # seed + index per choice


def test_seed_reproduces_output(client):
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=10,
                  temperature=1.0, seed=1234)
    a = client.chat.completions.create(**kwargs).choices[0].message.content
    b = client.chat.completions.create(**kwargs).choices[0].message.content
    c = client.chat.completions.create(**{**kwargs, "seed": 99}).choices[0].message.content
    assert a == b
    assert a != c


async def test_seed_is_independent_of_batch_neighbours(aclient):
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": "Name a colour."}], max_tokens=8,
                  temperature=1.0, seed=7)
    alone = (await aclient.chat.completions.create(**kwargs)).choices[0].message.content
    noise = [aclient.chat.completions.create(model=MODEL, messages=HI, max_tokens=8, temperature=1.0)
             for _ in range(3)]
    together = await asyncio.gather(aclient.chat.completions.create(**kwargs), *noise)
    assert together[0].choices[0].message.content == alone


def test_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=HI, max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for pos in content:
        assert pos.logprob <= 0 and len(pos.top_logprobs) == 3
        assert pos.top_logprobs[0].logprob >= pos.top_logprobs[-1].logprob
        assert abs(pos.top_logprobs[0].logprob - pos.logprob) < 1e-4   # greedy picks the most likely
    assert "".join(p.token for p in content) == r.choices[0].message.content


def test_max_completion_tokens_is_honoured(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Write an essay."}],
                                       max_completion_tokens=3, temperature=0)
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"

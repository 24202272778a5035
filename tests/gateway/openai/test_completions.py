"""/v1/completions and /v1/models through a real server with the openai SDK."""
from __future__ import annotations

import openai
import pytest

from transformers import AutoTokenizer

from conch.engine.weights import DEFAULT_MODEL_ID, ensure_smollm2

MODEL = DEFAULT_MODEL_ID
TOKENIZER = AutoTokenizer.from_pretrained(ensure_smollm2())


def test_models(client):
    ids = [m.id for m in client.models.list()]
    assert ids == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_completion_sync_and_stream_agree(client):
    kwargs = dict(model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0)
    whole = client.completions.create(**kwargs)
    assert whole.object == "text_completion" and whole.choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, **kwargs) if c.choices)
    assert streamed == whole.choices[0].text


async def test_completion_async(aclient):
    r = await aclient.completions.create(model=MODEL, prompt="1, 2, 3,", max_tokens=4, temperature=0)
    assert r.usage.completion_tokens == 4


def test_default_max_tokens_is_sixteen(client):
    r = client.completions.create(model=MODEL, prompt="Once upon a time", temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 16


def test_several_prompts_and_n(client):
    r = client.completions.create(model=MODEL, prompt=["Hello", "Goodbye"], max_tokens=3, n=2, temperature=0.8,
                                  seed=1, extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    assert r.usage.completion_tokens == 12
    assert r.usage.prompt_tokens == len(TOKENIZER.encode("Hello")) + len(TOKENIZER.encode("Goodbye"))


def test_echo_and_logprobs(client):
    r = client.completions.create(model=MODEL, prompt="Roses are red,", max_tokens=3, temperature=0, echo=True,
                                  logprobs=2)
    choice = r.choices[0]
    assert choice.text.startswith("Roses are red,")
    # The prompt's tokens come first (the first one without a logprob), then the generated ones.
    assert len(choice.logprobs.tokens) == r.usage.prompt_tokens + r.usage.completion_tokens
    assert choice.logprobs.token_logprobs[0] is None
    assert all(len(t) == 2 for t in choice.logprobs.top_logprobs[1:])
    assert choice.logprobs.text_offset[r.usage.prompt_tokens] == len("Roses are red,")


def test_token_id_prompt(client):
    r = client.completions.create(model=MODEL, prompt=[504, 3458, 314], max_tokens=2, temperature=0)
    assert r.usage.prompt_tokens == 3


def test_logit_bias_bans_the_greedy_token(client):
    first = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=1, temperature=0)
    token_id = TOKENIZER.encode(first.choices[0].text)[0]
    banned = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=1, temperature=0,
                                       logit_bias={str(token_id): -100})
    assert banned.choices[0].text != first.choices[0].text


def test_stop_token_ids_end_the_completion(client):
    free = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=6, temperature=0)
    second = TOKENIZER.encode(free.choices[0].text)[1]
    r = client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=6, temperature=0,
                                  extra_body={"stop_token_ids": [second]})
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 2

"""/v1/completions as evaluation harnesses use it (lm-evaluation-harness's log-likelihood): `echo` with `logprobs`
returns the prompt's tokens and logprobs (the first null) before the generated ones, and `max_tokens: 0` with
`echo` scores the prompt without generating. Checked against the model's own forward pass over the whole text."""
from __future__ import annotations

import math

import openai
import pytest
import torch

TINY = "tiny"
PROMPTS = [[17, 305, 92, 4000, 11, 6], [88, 12, 930]]


@pytest.fixture(scope="module")
def client(tiny_server):
    return openai.OpenAI(base_url=tiny_server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def model():
    """The tiny model loaded here, to compute what the server should answer directly."""
    from conch.engine.backends.conch import loader
    from conch.engine.repository.config import ModelConfig

    loaded = loader.load(ModelConfig.from_mapping(TINY, {"weights": "builtin:tiny", "dtype": "float32"}))
    return loaded.model, loaded.tokenizer


@torch.inference_mode()
def _rows(model, ids: list[int]) -> torch.Tensor:
    return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)   # (L, V)


def reference(model, ids: list[int]) -> list[float]:
    """Each token's logprob given the ones before it, from one forward pass over the whole text."""
    rows = _rows(model, ids)
    return [float(rows[i - 1, ids[i]]) for i in range(1, len(ids))]


def greedy(model, ids: list[int], steps: int) -> list[int]:
    ids = list(ids)
    for _ in range(steps):
        ids.append(int(_rows(model, ids)[-1].argmax()))
    return ids


def _check_prompt_part(lp, prompt: list[int]) -> None:
    assert len(lp.tokens) >= len(prompt)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(math.isfinite(x) and x <= 0 for x in lp.token_logprobs[1:len(prompt)])


def test_echo_with_logprobs_puts_the_prompt_first(client, model):
    r = client.completions.create(model=TINY, prompt=PROMPTS[0], max_tokens=3, temperature=0, echo=True, logprobs=2)
    lp = r.choices[0].logprobs
    assert r.usage.prompt_tokens == len(PROMPTS[0]) and r.usage.completion_tokens == 3
    assert len(lp.tokens) == len(PROMPTS[0]) + 3
    _check_prompt_part(lp, PROMPTS[0])
    assert all(len(top) == 2 for top in lp.top_logprobs[1:])
    # Greedy: the server's continuation and every logprob of the whole text, computed here directly.
    net, tokenizer = model
    ids = greedy(net, PROMPTS[0], 3)
    assert lp.tokens[len(PROMPTS[0]):] == [tokenizer.decode([t]) for t in ids[len(PROMPTS[0]):]]
    assert lp.token_logprobs[1:] == pytest.approx(reference(net, ids), abs=1e-3)
    assert r.choices[0].text.startswith(client.completions.create(
        model=TINY, prompt=PROMPTS[0], max_tokens=0, echo=True).choices[0].text)


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_zero_scores_each_prompt_without_generating(client, model, stream):
    kwargs = dict(model=TINY, prompt=PROMPTS, max_tokens=0, echo=True, logprobs=1, temperature=0)
    if stream:
        by_index: dict[int, list] = {}
        finish = {}
        for chunk in client.completions.create(stream=True, **kwargs):
            c = chunk.choices[0]
            if c.logprobs is not None:
                by_index.setdefault(c.index, []).extend(c.logprobs.token_logprobs)
            finish[c.index] = c.finish_reason or finish.get(c.index)
        results = [(by_index[i], finish[i]) for i in range(len(PROMPTS))]
    else:
        r = client.completions.create(**kwargs)
        assert r.usage.completion_tokens == 0 and r.usage.prompt_tokens == sum(map(len, PROMPTS))
        for c, prompt in zip(r.choices, PROMPTS, strict=True):
            assert len(c.logprobs.tokens) == len(prompt) and len(c.logprobs.text_offset) == len(prompt)
            _check_prompt_part(c.logprobs, prompt)
        results = [(c.logprobs.token_logprobs, c.finish_reason) for c in r.choices]
    for (token_logprobs, finish), prompt in zip(results, PROMPTS, strict=True):
        assert finish == "length"
        assert token_logprobs[0] is None and token_logprobs[1:] == pytest.approx(reference(model[0], prompt), abs=1e-3)


def test_max_tokens_zero_without_echo_is_400(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=TINY, prompt="hi", max_tokens=0)
    assert err.value.body["param"] == "max_tokens" and "None" not in err.value.body["message"]

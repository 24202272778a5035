"""vLLM's `min_tokens` on /v1 chat, /v1 completions and /v2 generate: EOS, stop_token_ids and stop strings do not
end a choice before that many tokens. SmolLM2 asked "Say only: hi" answers in a few tokens, then EOS."""
from __future__ import annotations

import httpx
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID

MODEL = DEFAULT_MODEL_ID
ASK = [{"role": "user", "content": "Say only: hi"}]
BUDGET = 8


@pytest.fixture(scope="module")
def chat_prompt(smollm2_server) -> str:
    from transformers import AutoTokenizer

    from conch.engine.weights import ensure_smollm2

    return AutoTokenizer.from_pretrained(str(ensure_smollm2())).apply_chat_template(ASK, tokenize=False,
                                                                                     add_generation_prompt=True)


def test_the_model_ends_early_without_min_tokens(client):
    r = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=BUDGET, temperature=0)
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens < BUDGET


@pytest.mark.parametrize("stream", [False, True])
def test_chat_min_tokens_holds_off_eos(client, stream):
    kwargs = dict(model=MODEL, messages=ASK, max_tokens=BUDGET, temperature=0, extra_body={"min_tokens": BUDGET})
    if stream:
        chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finish == ["length"] and chunks[-1].usage.completion_tokens == BUDGET
    else:
        r = client.chat.completions.create(**kwargs)
        assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == BUDGET


def test_completions_min_tokens_holds_off_eos_and_stop_strings(client, chat_prompt):
    # The greedy answer starts "Hi": a stop string "Hi" would end it at once; before min_tokens it does not.
    base = dict(model=MODEL, prompt=chat_prompt, max_tokens=BUDGET, temperature=0)
    assert client.completions.create(**base, stop=["Hi"]).choices[0].text == ""
    r = client.completions.create(**base, stop=["Hi"], extra_body={"min_tokens": BUDGET})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == BUDGET
    assert r.choices[0].text.startswith("Hi")


def test_v2_generate_min_tokens_holds_off_eos(smollm2_server, chat_prompt):
    url = f"{smollm2_server.url}/v2/models/{MODEL}/generate"
    params = {"max_tokens": BUDGET, "temperature": 0, "return_finish_reason": True, "return_num_output_tokens": True}
    early = httpx.post(url, json={"text_input": chat_prompt, "parameters": params}, timeout=120).json()
    assert early["finish_reason"] == "stop" and early["num_output_tokens"] < BUDGET
    r = httpx.post(url, json={"text_input": chat_prompt, "parameters": {**params, "min_tokens": BUDGET}}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["finish_reason"] == "length" and r.json()["num_output_tokens"] == BUDGET


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"messages": ASK, "max_tokens": 4, "min_tokens": 5}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 4, "min_tokens": 5}),
    ("/v1/completions", {"prompt": "hi", "min_tokens": -1}),
])
def test_min_tokens_out_of_range_is_400(smollm2_server, path, body):
    r = httpx.post(f"{smollm2_server.url}{path}", json={"model": MODEL, **body}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "min_tokens", r.text


def test_v2_min_tokens_above_max_tokens_is_400(smollm2_server):
    r = httpx.post(f"{smollm2_server.url}/v2/models/{MODEL}/generate",
                   json={"text_input": "hi", "parameters": {"max_tokens": 4, "min_tokens": 5}}, timeout=60)
    assert r.status_code == 400 and "min_tokens" in r.json()["error"]

"""Greedy chat completions are the same tokens however the server computes them (llama.py's batch invariance):
a request sent twice to an idle SmolLM2 bf16 server (the second from the first's kept slot), then again while
other requests run beside it. The response cache is off, so every answer is computed."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID
from tests.conftest import start_server, write_repository

MODEL = DEFAULT_MODEL_ID
ASKS = ["Write a short poem about the sea.", "List three uses of a paperclip.", "What is 17 times 23? Explain.",
        "Describe a cat to someone who has never seen one.", "Give me a recipe for pancakes."]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {MODEL: {"weights": "builtin:smollm2", "dtype": "bfloat16", "response_cache": False,
                                    "batch_invariant": True,
                                    "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root)], root)
    yield openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    server.stop()


def _answer(client: openai.OpenAI, ask: str) -> str:
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": ask}], max_tokens=24,
                                       temperature=0)
    return r.choices[0].message.content or ""


@pytest.mark.parametrize("ask", ASKS[:2])
def test_the_same_greedy_request_twice_then_among_others(client, ask):
    first = _answer(client, ask)
    assert first and _answer(client, ask) == first                   # idle server, then its kept slot
    with ThreadPoolExecutor(len(ASKS)) as pool:                       # beside four other requests
        answers = list(pool.map(lambda a: _answer(client, a), [ask] + [a for a in ASKS if a != ask]))
    assert answers[0] == first

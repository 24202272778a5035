"""The example ensemble (preprocess -> SmolLM2 -> postprocess, examples/model_repository) through /v1 with the
openai SDK against a real server: chat and completions, streamed and not, the post-processing visibly applied
(the postprocess step masks the banned word "heck" that SmolLM2 repeats back)."""
from __future__ import annotations

import shutil
from pathlib import Path

import openai
import pytest

from tests.conftest import start_server

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "model_repository"
ASK = "Repeat after me: heck"
GREEDY = dict(model="assistant", max_tokens=24, temperature=0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo") / "model_repository"
    shutil.copytree(EXAMPLE, root)
    server = start_server(["--model-repository", str(root)], root.parent)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


def test_the_llm_step_alone_says_the_banned_word(client):
    r = client.completions.create(prompt=f"Question: {ASK}\nAnswer:", **{**GREEDY, "model": "smollm2"})
    assert "heck" in r.choices[0].text


def test_completions(client):
    r = client.completions.create(prompt=ASK, **GREEDY)
    text = r.choices[0].text
    assert "***" in text and "heck" not in text
    assert r.model == "assistant" and r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 24


def test_completions_streamed(client):
    chunks = list(client.completions.create(prompt=ASK, stream=True, **GREEDY))
    pieces = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(pieces) >= 2                      # streamed piece by piece, each post-processed on its own
    text = "".join(pieces)
    assert "***" in text and "heck" not in text
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_chat(client):
    r = client.chat.completions.create(messages=[{"role": "user", "content": ASK}], **GREEDY)
    content = r.choices[0].message.content
    assert "***" in content and "heck" not in content
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


def test_chat_streamed(client):
    chunks = list(client.chat.completions.create(messages=[{"role": "user", "content": ASK}], stream=True,
                                                 stream_options={"include_usage": True}, **GREEDY))
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "***" in content and "heck" not in content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_a_python_model_is_refused_by_name(client):
    with pytest.raises(openai.BadRequestError, match="preprocess"):
        client.completions.create(model="preprocess", prompt="hi", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="preprocess"):
        client.chat.completions.create(model="preprocess", messages=[{"role": "user", "content": "hi"}])

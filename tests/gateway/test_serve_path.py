"""`conch serve FILE.gguf --model NAME=FOLDER`: one command serves a GGUF (its vocabulary, chat template and
sampling defaults from its metadata) and an HF folder (its generation_config.json), through the openai SDK."""
from __future__ import annotations

import json
import shutil

import pytest
from openai import OpenAI

from conch.engine.weights import ensure_tiny_model
from tests.conftest import start_server
from tests.gguf_files import small_llama, write_llama_gguf


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    gguf = write_llama_gguf(small_llama(), root / "tiny-llama-Q8_0.gguf", "Q8_0", sampling={"temp": 0.0})
    folder = root / "folder"
    shutil.copytree(ensure_tiny_model(), folder)
    (folder / "generation_config.json").write_text(json.dumps({"temperature": 0.0, "top_k": 5}))
    server = start_server([str(gguf), "--model", f"folder={folder}"], root, timeout=600)
    yield server
    server.stop()


def _client(server) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="none")


def test_both_are_served_under_their_names(server):
    assert {m.id for m in _client(server).models.list()} == {"tiny-llama-Q8_0", "folder"}


@pytest.mark.parametrize("model", ["tiny-llama-Q8_0", "folder"])
def test_the_models_own_temperature_applies_when_the_request_omits_it(server, model):
    client = _client(server)
    chat = [{"role": "user", "content": "Say something."}]
    omitted = client.chat.completions.create(model=model, messages=chat, n=3, max_tokens=8)
    assert len({c.message.content for c in omitted.choices}) == 1          # temperature 0: greedy
    sent = client.chat.completions.create(model=model, messages=chat, n=3, max_tokens=8, temperature=1.0)
    assert len({c.message.content for c in sent.choices}) > 1               # the request's own value wins


def test_the_gguf_chat_template_and_vocabulary_serve_chat(server):
    from transformers import AutoTokenizer

    from conch.engine.weights import ensure_smollm2

    chat = [{"role": "user", "content": "What is a shell?"}]
    reply = _client(server).chat.completions.create(model="tiny-llama-Q8_0", messages=chat, max_tokens=2)
    smollm2 = AutoTokenizer.from_pretrained(ensure_smollm2())        # the vocabulary and template it was made from
    assert reply.usage.prompt_tokens == len(smollm2.apply_chat_template(chat, add_generation_prompt=True,
                                                                        tokenize=True, return_dict=True)["input_ids"])

"""`conch serve FILE.gguf --model NAME=FOLDER`: one command serves a GGUF (its vocabulary, chat template and
sampling defaults from its metadata) and an HF folder (its generation_config.json), through the openai SDK; a
Phi-3 GGUF (a repository's config: float32) is served with the logprobs of its dequantized reference."""
from __future__ import annotations

import json
import shutil

import pytest
from openai import OpenAI

from conch.engine.weights import ensure_tiny_model
from tests.conftest import start_server, write_repository
from tests.gguf_files import small_llama, small_phi3, write_llama_gguf

PHI3 = "phi3-Q8_0"


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


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    """A Phi-3 Q8_0 GGUF served from a repository whose config reads it in float32: (server, file)."""
    root = tmp_path_factory.mktemp("phi3")
    path = write_llama_gguf(small_phi3(), root / f"{PHI3}.gguf", "Q8_0")
    repository = write_repository(root / "repository", {PHI3: {"weights": str(path), "dtype": "float32"}})
    server = start_server(["--model-repository", str(repository)], root, timeout=600)
    yield server, path
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


def test_a_phi3_gguf_serves_greedy_tokens_with_its_references_logprobs(phi3):
    """The flattened runner over the Phi-3 file's fused quantized matrices, through the openai SDK: each greedy
    token's logprob that of the float32 forward of the dequantized file (test_gguf_quantized's 1e-3), and that
    token the reference's top choice."""
    import torch
    from transformers import AutoTokenizer

    from conch.engine.weights import ensure_smollm2
    from conch.engine.weights.gguf_file import load_gguf_dequantized, read_gguf

    server, path = phi3
    prompt = [1] + [(i * 97) % 40000 + 100 for i in range(30)]
    done = _client(server).completions.create(model=PHI3, prompt=prompt, max_tokens=6, temperature=0, logprobs=1,
                                              extra_body={"ignore_eos": True})
    served = done.choices[0].logprobs
    assert len(served.tokens) == len(served.token_logprobs) == 6
    vocabulary = AutoTokenizer.from_pretrained(ensure_smollm2())       # the file's: its token strings -> ids
    ids: dict[str, list[int]] = {}
    for i in range(len(vocabulary)):
        ids.setdefault(vocabulary.decode([i]), []).append(i)
    reference = load_gguf_dequantized(read_gguf(path), torch.float32)
    tokens = prompt
    for text, logprob in zip(served.tokens, served.token_logprobs, strict=True):
        with torch.inference_mode():
            want = torch.log_softmax(reference(input_ids=torch.tensor([tokens])).logits[0, -1].float(), -1)
        token = min(ids[text], key=lambda t: abs(want[t].item() - logprob))     # (a string a few ids decode to)
        assert abs(logprob - want[token].item()) <= 1e-3, (text, logprob, want[token].item())
        assert want.max().item() - want[token].item() <= 1e-3, text
        tokens = tokens + [token]

"""`conch serve FILE.gguf --model NAME=FOLDER`: one command serves a GGUF (its vocabulary, chat template and
sampling defaults from its metadata) and an HF folder (its generation_config.json), through the openai SDK;
Phi-3, SmolLM3 and Granite GGUFs (a repository's configs: float32) serve their dequantized references' logprobs."""
from __future__ import annotations

import json
import shutil

import pytest
from openai import OpenAI

from conch.engine.weights import ensure_tiny_model
from tests.conftest import start_server, write_repository
from tests.gguf_files import small_granite, small_llama, small_phi3, small_smollm3, write_llama_gguf

FAMILIES = {"phi3-Q8_0": small_phi3, "smollm3-Q8_0": small_smollm3, "granite-Q8_0": small_granite}


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
def families(tmp_path_factory):
    """Q8_0 GGUFs of families beyond Llama's layout (Phi-3's fused matrices and partial rotary; SmolLM3's NoPE
    layers and Granite's multipliers, architectures transformers' GGUF loader does not read), served from a
    repository whose configs read them in float32: (server, {name: file})."""
    root = tmp_path_factory.mktemp("families")
    paths = {name: write_llama_gguf(model(), root / f"{name}.gguf", "Q8_0") for name, model in FAMILIES.items()}
    repository = write_repository(root / "repository", {name: {"weights": str(path), "dtype": "float32"}
                                                        for name, path in paths.items()})
    server = start_server(["--model-repository", str(repository)], root, timeout=600)
    yield server, paths
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


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_gguf_of_another_layout_serves_its_references_greedy_tokens_and_logprobs(families, name):
    """The flattened runner over the file's quantized matrices, through the openai SDK: each greedy token's
    logprob that of the float32 forward of the file's dequantized weights (test_gguf_quantized's 1e-3), and that
    token the reference's top choice. Reference: transformers' GGUF loader (Phi-3), or for SmolLM3 and Granite,
    which it does not read, the skeleton's own dequantizing build (gguf_layers.build_quantized without a kernel)
    through transformers' forward of the family."""
    import torch
    from transformers import AutoTokenizer

    from conch.engine.backends.conch.model.gguf_layers import build_quantized
    from conch.engine.weights import ensure_smollm2
    from conch.engine.weights.gguf_config import AS_LLAMA
    from conch.engine.weights.gguf_file import load_gguf_dequantized, read_gguf

    server, paths = families
    prompt = [1] + [(i * 97) % 40000 + 100 for i in range(30)]
    done = _client(server).completions.create(model=name, prompt=prompt, max_tokens=6, temperature=0, logprobs=1,
                                              extra_body={"ignore_eos": True})
    served = done.choices[0].logprobs
    assert len(served.tokens) == len(served.token_logprobs) == 6
    vocabulary = AutoTokenizer.from_pretrained(ensure_smollm2())       # the file's: its token strings -> ids
    ids: dict[str, list[int]] = {}
    for i in range(len(vocabulary)):
        ids.setdefault(vocabulary.decode([i]), []).append(i)
    info = read_gguf(paths[name])
    reference = (build_quantized(info, torch.float32, None, hf=True) if info.architecture in AS_LLAMA else
                 load_gguf_dequantized(info, torch.float32))
    tokens = prompt
    for text, logprob in zip(served.tokens, served.token_logprobs, strict=True):
        with torch.inference_mode():
            want = torch.log_softmax(reference(input_ids=torch.tensor([tokens])).logits[0, -1].float(), -1)
        token = min(ids[text], key=lambda t: abs(want[t].item() - logprob))     # (a string a few ids decode to)
        assert abs(logprob - want[token].item()) <= 1e-3, (text, logprob, want[token].item())
        assert want.max().item() - want[token].item() <= 1e-3, text
        tokens = tokens + [token]

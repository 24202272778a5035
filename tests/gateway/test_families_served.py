"""Every family of the flattened runner served by one real server (`conch serve --model NAME=FOLDER ...`):
tiny random-weights folders with SmolLM2's tokenizer, each answering a chat through the openai SDK on the
flattened runner (the server's log names the runner each model got)."""
from __future__ import annotations

import pytest
import torch
import transformers
from openai import OpenAI
from transformers import AutoModelForCausalLM, AutoTokenizer

from conch.engine.weights import ensure_smollm2
from tests.conftest import start_server

TINY = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=2)
FAMILIES = {
    "llama3": lambda: transformers.LlamaConfig(**TINY, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 128}),
    "qwen3": lambda: transformers.Qwen3Config(**TINY, head_dim=16),
    "granite": lambda: transformers.GraniteConfig(**TINY, embedding_multiplier=12.0, attention_multiplier=0.0625,
                                                  residual_multiplier=0.22, logits_scaling=8.0),
    "smollm3": lambda: transformers.SmolLM3Config(**TINY, no_rope_layers=[1, 0]),
    "gemma3": lambda: transformers.Gemma3TextConfig(**TINY, head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
                                                    layer_types=["sliding_attention", "full_attention"]),
    "phi3": lambda: transformers.Phi3Config(**TINY, rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                                    "partial_rotary_factor": 0.5}),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    tokenizer = AutoTokenizer.from_pretrained(ensure_smollm2())
    args = []
    for name, config in FAMILIES.items():
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(config()).save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        args += ["--model", f"{name}={root / name}"]
    server = start_server(args, root, timeout=600)
    yield server
    server.stop()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_answers_on_the_flattened_runner(server, name):
    client = OpenAI(base_url=f"{server.url}/v1", api_key="none")
    reply = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                           temperature=0)
    assert reply.choices[0].finish_reason in ("length", "stop") and reply.usage.completion_tokens >= 1
    assert f"model {name}: the flattened runner" in server.log.read_text()

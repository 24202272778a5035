"""Each family on the flattened forward (families.py): a small random-weights model built from its transformers
config gives the HF forward's logits (float32: to rounding; bfloat16 through the native kernels: within bf16
tolerance), prefill chunked and decode rows alike. No hub download: the configs are built here."""
from __future__ import annotations

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM

from conch.engine.backends.conch.model.families import Family, family
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from tests.engine.backends.conch.steps import Occupant, make_step

SMALL = dict(vocab_size=512, hidden_size=256, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _phi3_rope(kind: str) -> dict:
    if kind == "partial":
        return {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75}
    half = 64 * 3 // 4 // 2
    return {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
            "short_factor": [1.0 + i / half for i in range(half)], "long_factor": [4.0] * half,
            "original_max_position_embeddings": 256}


# local (sliding-window) and global layers interleaved; the window (32) is shorter than the prompt's chunks
GEMMA3_LAYERS = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]

CONFIGS = {
    "llama3": lambda: transformers.LlamaConfig(**SMALL, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    "qwen2": lambda: transformers.Qwen2Config(**SMALL),
    "qwen3": lambda: transformers.Qwen3Config(**SMALL, head_dim=64),
    "granite": lambda: transformers.GraniteConfig(**SMALL, embedding_multiplier=12.0, attention_multiplier=0.015,
                                                  residual_multiplier=0.22, logits_scaling=8.0),
    "smollm3": lambda: transformers.SmolLM3Config(**SMALL, no_rope_layers=[1, 1, 0, 1]),
    "phi3": lambda: transformers.Phi3Config(**SMALL, rope_parameters=_phi3_rope("partial")),
    "gemma3": lambda: transformers.Gemma3TextConfig(**SMALL, head_dim=64, query_pre_attn_scalar=48, sliding_window=32,
                                                    layer_types=GEMMA3_LAYERS, final_logit_softcapping=30.0),
    "phi3-longrope": lambda: transformers.Phi3Config(**{**SMALL, "max_position_embeddings": 1024},
                                                     rope_parameters=_phi3_rope("longrope")),
}


def _model(name: str, dtype: torch.dtype):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(CONFIGS[name](), dtype=torch.float32).eval()
    offset = 1.0 if name.startswith("gemma") else 0.0      # Gemma's norms multiply by 1 + w
    for p in model.parameters():                     # norms away from 1, so a misplaced norm weight shows
        if p.dim() == 1:
            p.data.uniform_(0.5 - offset, 1.5 - offset)
    return model.to(dtype)


def _ours(model, prompt: list[int], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits at the prompt's last token (prefill in two chunks) and at one decode row after it."""
    forward = LlamaForward(model)
    c = model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, dtype, 2**26, 2,
                     blocked=forward.kernels.blocked)
    slot = kv.admit(Occupant(), 256)
    forward(make_step([(slot, 0, prompt[:40])], [39]), kv)
    last = forward(make_step([(slot, 40, prompt[40:])], [len(prompt) - 41]), kv)
    decode = forward(make_step([(slot, len(prompt), [7])], [0]), kv)
    return last[0], decode[0]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_flat_forward_gives_the_hf_logits(name, dtype):
    model = _model(name, dtype)
    assert isinstance(family(model.config), Family)
    prompt = [(i * 37) % 500 + 3 for i in range(100)]
    with torch.inference_mode():
        ref = model.float()(input_ids=torch.tensor([prompt + [7]])).logits[0]   # the same weights in float32
    model.to(dtype)
    last, decode = _ours(model, prompt, dtype)
    scale = ref.abs().max().item()
    tol = 1e-4 if dtype == torch.float32 else 0.05
    for got, want in ((last, ref[len(prompt) - 1]), (decode, ref[len(prompt)])):
        assert (got - want).abs().max().item() <= tol * scale, (name, (got - want).abs().max().item(), scale)
        assert got.argmax() == want.argmax() or dtype == torch.bfloat16


def test_gemma3s_layers_are_read_from_its_config():
    fam = family(CONFIGS["gemma3"]())
    assert isinstance(fam, Family)
    assert fam.windows == (32, 32, None, 32) and fam.rope_kinds == tuple(GEMMA3_LAYERS)
    assert fam.q_norm_scale == pytest.approx((64 / 48) ** 0.5) and fam.embed_scale == 16.0


def test_an_architecture_or_window_it_does_not_reproduce_is_named():
    assert "gpt2" in family(transformers.GPT2Config())
    capped = transformers.Gemma3TextConfig(**SMALL, attn_logit_softcapping=50.0)
    assert "soft-capping" in family(capped)
    windowed = transformers.MistralConfig(**{**SMALL, "sliding_window": 64})
    assert "sliding window of 64" in family(windowed)

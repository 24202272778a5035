"""gguf_skeleton.py: the flattened runner's module tree of a GGUF built without transformers' modeling stack.
Its names, classes and shapes are transformers' own for each family, its rotary tables are the HF module's
bit for bit, a served file's load imports no modeling code, and the HF model built on first use (prompt
logprobs) runs over the skeleton's own tensors with the logits of a model built the HF way."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
import transformers

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.gguf_skeleton import LAYOUTS, skeleton
from conch.engine.weights import ensure_smollm2

SMALL = dict(vocab_size=512, hidden_size=256, intermediate_size=384, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512, bos_token_id=1, eos_token_id=2)
CONFIGS = {
    "llama3-biases": lambda: transformers.LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    "llama-tied": lambda: transformers.LlamaConfig(**SMALL, tie_word_embeddings=True),
    "mistral": lambda: transformers.MistralConfig(**SMALL, sliding_window=None),
    "qwen2": lambda: transformers.Qwen2Config(**SMALL),
    "qwen3": lambda: transformers.Qwen3Config(**SMALL, head_dim=128),
    "gemma3": lambda: transformers.Gemma3TextConfig(**SMALL, head_dim=64, query_pre_attn_scalar=64, sliding_window=32,
                                                    layer_types=["sliding_attention", "full_attention",
                                                                 "sliding_attention"]),
    "granite": lambda: transformers.GraniteConfig(**SMALL, attention_bias=True, embedding_multiplier=4.0,
                                                  attention_multiplier=0.1, residual_multiplier=0.5,
                                                  logits_scaling=2.0),
    "smollm3": lambda: transformers.SmolLM3Config(**{**SMALL, "num_hidden_layers": 4}, pad_token_id=0,
                                                  use_sliding_window=False),
    # Phi-3's fused qkv_proj and gate_up_proj; Phi-4-mini's partial rotary, and Phi-3.5's longrope
    "phi3-partial": lambda: transformers.Phi3Config(**SMALL, pad_token_id=0, rope_parameters=dict(
        rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.75)),
    "phi3-longrope": lambda: transformers.Phi3Config(
        **{**SMALL, "max_position_embeddings": 2048}, pad_token_id=0, original_max_position_embeddings=512,
        rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=512,
                             short_factor=[1.0 + 0.1 * i for i in range(32)],
                             long_factor=[2.0 + 0.1 * i for i in range(32)])),
}


def _hf(config):
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def _kind(module) -> str:
    return next((k.__name__ for k in (torch.nn.Linear, torch.nn.Embedding) if isinstance(module, k)), "other")


def _shapes(model) -> dict[str, tuple[str, tuple[int, ...]]]:
    """parameter name -> (its module's kind: Linear, Embedding or other, its shape), tied parameters under each
    name."""
    return {name: (_kind(model.get_submodule(name.rpartition(".")[0])), tuple(p.shape))
            for name, p in model.named_parameters(remove_duplicate=False)}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_skeleton_has_transformers_names_classes_and_shapes(name):
    config = CONFIGS[name]()
    ours, theirs = skeleton(config, torch.bfloat16), _hf(config)
    assert ours is not None and config.model_type in LAYOUTS
    assert _shapes(ours) == _shapes(theirs)        # Linear and Embedding where HF has them, norms as "other"
    assert all(p.is_meta for p in ours.parameters())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_rotary_tables_are_the_hf_modules(name):
    config = CONFIGS[name]()
    ours = skeleton(config, torch.bfloat16)
    assert ours is not None
    hf = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    x, positions = torch.zeros(1, 1, config.hidden_size), torch.arange(300).unsqueeze(0)
    kinds = sorted(set(config.layer_types)) if name == "gemma3" else [None]
    for kind in kinds:
        extra = () if kind is None else (kind,)
        want = hf.model.rotary_emb(x, positions, *extra)
        got = ours.model.rotary_emb(x, positions, *extra)
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)), kind


def test_a_family_the_flattened_forward_does_not_take_has_no_skeleton():
    assert skeleton(transformers.MistralConfig(**SMALL, sliding_window=64), torch.bfloat16) is None
    assert skeleton(transformers.Phi3Config(**SMALL, pad_token_id=0, sliding_window=64), torch.bfloat16) is None


LOAD = textwrap.dedent("""
    import sys, torch
    from pathlib import Path
    from conch.engine.backends.conch import loader
    from conch.engine.backends.conch.model.gguf_layers import build_quantized
    from conch.engine.backends.conch.model.gguf_skeleton import SkeletonModel
    from conch.engine.repository import ModelConfig
    from conch.engine.weights.gguf_file import read_gguf
    from conch.engine.weights import ensure_smollm2

    path = Path(sys.argv[1])
    served = loader.load(ModelConfig(name="m", weights=str(path), dtype="float32",
                                     tokenizer=str(ensure_smollm2()))).model
    assert isinstance(served, SkeletonModel), type(served)
    assert "transformers.modeling_utils" not in sys.modules, "the load imported transformers' modeling stack"
    ids = torch.tensor([[1] + [(i * 97) % 40000 + 100 for i in range(40)]])
    with torch.inference_mode():
        got = served(input_ids=ids, use_cache=False).logits             # the HF model, built on this call
        hf = served.hf()
        assert hf.model.layers[0].self_attn.q_proj is served.model.layers[0].self_attn.q_proj
        assert hf.model.norm.weight is served.model.norm.weight
        assert not any(name.startswith("_hf") for name, _ in served.named_modules())   # not a submodule
        kernel = served.model.layers[0].self_attn.q_proj.matrix.kernel
        want = build_quantized(read_gguf(path), torch.float32, kernel)(input_ids=ids, use_cache=False).logits
    assert torch.equal(got, want), (got - want).abs().max()
    print("ok")
""")


@pytest.mark.parametrize("tied", [False, True], ids=["head", "tied"])
def test_a_served_gguf_loads_without_modeling_code_and_its_hf_model_shares_its_tensors(tmp_path, tied):
    """In a fresh interpreter (this one has imported transformers' models): the load imports no modeling code;
    the lazily built HF model holds the skeleton's own modules and gives the logits of an HF-built model."""
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    from tests.gguf_files import small_llama, write_llama_gguf

    path = write_llama_gguf(small_llama(hidden=256, inter=512, init=0.1, tied=tied), tmp_path / "m.gguf", "Q8_0")
    ensure_smollm2()                  # on a fresh cache its first conversion (here) imports the modeling stack
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]

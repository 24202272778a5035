"""GGUF files written locally for tests: a small HF Llama's tensors under llama.cpp's names (q/k rows permuted
as convert_hf_to_gguf.py permutes them), SmolLM2's vocabulary and chat template copied from its packaged GGUF,
each matrix in a chosen GGML type. Q8_0/Q4_0/Q4_1 are gguf's own quantizers over the model's weights; the
K-quants (which gguf cannot quantize) are random blocks with bounded scales: their values are what the file
says they are, which is all an accuracy test against gguf's own dequantizer needs."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import torch

# where each type's fp16 scales sit in its block (bytes), and the block's size in bytes and values
_SCALES = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q4_K": (0, 2), "Q5_K": (0, 2),
           "Q6_K": (208,)}
# a block scale giving values of ~0.1 (sub-block scales and quants are random)
K_SCALE = {"Q4_K": 0.0005, "Q5_K": 0.0003, "Q6_K": 0.0001}


def random_blocks(qtype: str, rows: int, cols: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """(rows, bytes) uint8: random quants, every fp16 scale uniform in [scale/2, scale]."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[qtype]]
    data = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    for at in _SCALES[qtype]:
        d = rng.uniform(scale / 2, scale, size=(rows, cols // block)).astype(np.float16)
        data[:, :, at:at + 2] = d.view(np.uint8).reshape(rows, cols // block, 2)
    return data.reshape(rows, -1)


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# HF module -> llama.cpp tensor, by model type (SmolLM3, Granite: llama's; Phi-3: one fused qkv, ffn_up [gate; up])
_LLAMA_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_NAMES = {
    "llama": _LLAMA_NAMES, "smollm3": _LLAMA_NAMES, "granite": _LLAMA_NAMES,
    "phi3": {"input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"},
}


def _tensors(model) -> dict[str, np.ndarray]:
    c, sd = model.config, {k: v.float().numpy() for k, v in model.state_dict().items()}
    out = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"]}
    if not c.tie_word_embeddings:
        out["output.weight"] = sd["lm_head.weight"]
    for i in range(c.num_hidden_layers):
        for hf, ours in _NAMES[c.model_type].items():
            w = sd[f"model.layers.{i}.{hf}.weight"]
            if ours == "attn_q":                        # llama's q / k as convert_hf_to_gguf.py permutes them
                w = _permute(w, c.num_attention_heads)
            elif ours == "attn_k":
                w = _permute(w, c.num_key_value_heads)
            out[f"blk.{i}.{ours}.weight"] = w
    return out


@functools.cache
def _tokenizer_fields(source: Path) -> tuple[tuple[str, Any, Any, Any], ...]:
    """`source`'s tokenizer.* keys as (name, value, type, array element type): read once per process (gguf's
    reader takes seconds over a 49k-token vocabulary, and every file written here copies it)."""
    from gguf import GGUFReader, GGUFValueType

    return tuple((name, field.contents(), field.types[0],
                  field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None)
                 for name, field in GGUFReader(source).fields.items() if name.startswith("tokenizer."))


def _copy_tokenizer(writer, source: Path) -> None:
    for name, value, kind, sub in _tokenizer_fields(source):
        writer.add_key_value(name, value, kind, sub)


def write_llama_gguf(model, path: Path, qtype: str, sampling: dict[str, float] | None = None,
                     seed: int = 0, vocabulary: bool = True) -> Path:
    """`model` (an HF Llama, SmolLM3, Granite or Phi-3 with SmolLM2's vocabulary) as a GGUF at `path`: its 2-D
    matrices in `qtype` (the embedding too), norms in F32. `sampling`: general.sampling.* keys (temp, top_p, top_k).
    `vocabulary` False: no tokenizer keys (a model of another vocabulary size, loaded without a tokenizer)."""
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
    from gguf.quants import quantize

    from conch.engine.weights.smollm2 import gguf_path

    c, rng = model.config, np.random.default_rng(seed)
    writer = GGUFWriter(str(path), c.model_type)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_freq_base(float(getattr(c, "rope_theta", None) or c.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_vocab_size(c.vocab_size)
    rotary = (getattr(c, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0)
    writer.add_rope_dimension_count(int(c.hidden_size // c.num_attention_heads * rotary))
    if c.model_type == "granite":                 # its multipliers, as llama.cpp's converter writes them
        writer.add_attention_scale(c.attention_multiplier)
        writer.add_embedding_scale(c.embedding_multiplier)
        writer.add_residual_scale(c.residual_multiplier)
        writer.add_logit_scale(c.logits_scaling)
    for key, value in (sampling or {}).items():
        writer.add_key_value(f"general.sampling.{key}", value,
                             GGUFValueType.INT32 if key == "top_k" else GGUFValueType.FLOAT32)
    if vocabulary:
        _copy_tokenizer(writer, gguf_path())
    kind = GGMLQuantizationType[qtype]
    for name, w in _tensors(model).items():
        if w.ndim == 1 or qtype == "F32":
            writer.add_tensor(name, w.astype(np.float32))
        elif qtype in ("F16",):
            writer.add_tensor(name, w.astype(np.float16))
        elif qtype in _SCALES and qtype.endswith("_K"):
            writer.add_tensor(name, random_blocks(qtype, *w.shape, scale=K_SCALE[qtype], rng=rng), raw_dtype=kind)
        else:
            writer.add_tensor(name, quantize(w, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def small_llama(hidden: int = 64, inter: int = 128, layers: int = 2, seed: int = 0, init: float = 0.02,
                vocab: int = 49152, tied: bool = False):
    """A random-weights Llama with SmolLM2's vocabulary size (float32); `init`: its weights' std; `tied`: its
    head is its embedding (the GGUF then holds no output.weight)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=1, eos_token_id=2, tie_word_embeddings=tied,
                         initializer_range=init)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).float().eval()


def small_phi3(hidden: int = 256, inter: int = 512, layers: int = 2, seed: int = 0, init: float = 0.1,
               partial: float = 0.75):
    """A random-weights Phi-3 (its fused qkv_proj and gate_up_proj) with SmolLM2's vocabulary size (float32),
    rotating the first `partial` of each head as Phi-4-mini does."""
    from transformers import Phi3Config, Phi3ForCausalLM

    config = Phi3Config(vocab_size=49152, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                        bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                        initializer_range=init, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                                     partial_rotary_factor=partial))
    torch.manual_seed(seed)
    return Phi3ForCausalLM(config).float().eval()


def small_smollm3(hidden: int = 256, inter: int = 512, layers: int = 4, seed: int = 0, init: float = 0.1):
    """A random-weights SmolLM3 (every 4th layer without RoPE, as llama.cpp's smollm3 fixes it) with SmolLM2's
    vocabulary size (float32)."""
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    config = SmolLM3Config(vocab_size=49152, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                           bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                           initializer_range=init, no_rope_layer_interval=4, use_sliding_window=False)
    torch.manual_seed(seed)
    return SmolLM3ForCausalLM(config).float().eval()


def small_granite(hidden: int = 256, inter: int = 512, layers: int = 2, seed: int = 0, init: float = 0.1):
    """A random-weights Granite (its embedding, attention, residual and logit multipliers away from 1) with
    SmolLM2's vocabulary size (float32)."""
    from transformers import GraniteConfig, GraniteForCausalLM

    config = GraniteConfig(vocab_size=49152, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                           bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                           initializer_range=init, embedding_multiplier=4.0, attention_multiplier=0.125,
                           residual_multiplier=0.5, logits_scaling=2.0)
    torch.manual_seed(seed)
    return GraniteForCausalLM(config).float().eval()

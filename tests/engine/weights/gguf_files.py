"""Small GGUF files written for the weights' tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np

TOKENS = [f"t{i}" for i in range(40)]


def write_gguf(path: Path, arch: str, name: str = "tiny", tied: bool = True, extra=None, tensors=None,
               layers: int = 2, head_dim: int = 16) -> Path:
    """A small GGUF of `arch` with llama.cpp's metadata keys (arbitrary values: embedding 64, `layers` layers of 4
    heads of `head_dim`) and a 40-token vocabulary; `extra`: GGUFWriter add_* calls and their values; `tensors`:
    name -> array, beside the token embedding (and output.weight where not `tied`)."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(4096)
    writer.add_embedding_length(64)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1e6)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    for key, value in (extra or {}).items():
        getattr(writer, key)(value)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_tensor("token_embd.weight", np.zeros((len(TOKENS), 64), np.float32))
    if not tied:
        writer.add_tensor("output.weight", np.zeros((len(TOKENS), 64), np.float32))
    for tensor, values in (tensors or {}).items():
        writer.add_tensor(tensor, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

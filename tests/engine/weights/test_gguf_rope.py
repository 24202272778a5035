"""gguf_rope.py: the llama3 rope_parameters recovered from llama.cpp's per-pair rope_freqs give those factors
back (Llama 3.1's and 3.2's own scalings), plain factors give none, others are refused; the linear and YaRN
scalings the rope.scaling keys name (Gemma 3's on its global layers), Phi-3's partial rotary and longrope come
from the keys and factor tensors; a GGUF that holds them gets them in its config
(gguf_file.load_gguf_config), and one whose factors no llama3 scaling gives is refused by name at load.
(tests/engine/backends/conch/model/test_llama_cpp_files.py: Llama 3, YaRN Qwen3, linear Gemma 3 and Phi-3 files
made by llama.cpp's converter give the HF model's logprobs.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conch.engine.errors import BackendUnavailable
from conch.engine.weights.gguf_file import load_gguf_config, read_gguf
from conch.engine.weights.gguf_rope import RULES, llama3_factors, llama3_parameters
from tests.engine.weights.gguf_files import write_gguf

LLAMA_3_1 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
LLAMA_3_2 = {**LLAMA_3_1, "factor": 32.0}


@pytest.mark.parametrize("params, head_dim", [(LLAMA_3_1, 128), (LLAMA_3_2, 64),
                                               ({**LLAMA_3_1, "rope_theta": 10000.0,
                                                 "original_max_position_embeddings": 64}, 64)])
def test_the_factors_give_back_their_parameters(params, head_dim):
    factors = llama3_factors(params, head_dim).astype(np.float32)        # as the file holds them
    assert llama3_parameters(factors, head_dim, params["rope_theta"]) == params


def test_transformers_rotates_by_the_same_factors():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=2048, num_attention_heads=32, rope_parameters=dict(LLAMA_3_2))
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](config, None)
    plain = 1.0 / (500000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert np.allclose(plain.numpy() / scaled.double().numpy(), llama3_factors(LLAMA_3_2, 64), rtol=1e-5)


def test_a_step_with_no_pair_between_gets_bounds_that_give_it():
    factors = np.r_[np.ones(3), np.full(5, 8.0)].astype(np.float32)          # 8 pairs, none smoothed
    params = llama3_parameters(factors, 16, 1e6)
    assert params is not None and np.allclose(llama3_factors(params, 16), factors)


def test_plain_factors_are_plain_rope_and_others_are_refused():
    assert llama3_parameters(np.ones(32, np.float32), 64, 500000.0) is None
    with pytest.raises(ValueError, match="no Llama 3 RoPE scaling gives"):
        llama3_parameters(np.linspace(1, 8, 32), 64, 500000.0)          # a ramp over every pair
    with pytest.raises(ValueError, match="no Llama 3 RoPE scaling gives"):
        llama3_parameters(np.r_[np.full(16, 8.0), np.ones(16)], 64, 500000.0)   # the short wavelengths scaled
    with pytest.raises(ValueError, match="one smoothed pair"):
        llama3_parameters(np.r_[np.ones(15), 2.0, np.full(16, 8.0)], 64, 500000.0)
    with pytest.raises(ValueError, match="16 factors"):
        llama3_parameters(np.ones(16), 64, 500000.0)


def _file(tmp_path: Path, factors: np.ndarray) -> Path:
    return write_gguf(tmp_path / "llama3.gguf", "llama", tensors={"rope_freqs.weight": factors})


def test_a_files_rope_freqs_become_its_configs_scaling(tmp_path):
    factors = np.r_[np.ones(3), np.full(5, 8.0)].astype(np.float32)      # the written file: 8 pairs, base 1e6
    config = load_gguf_config(read_gguf(_file(tmp_path, factors)))
    assert config.rope_parameters["rope_type"] == "llama3"
    assert np.allclose(llama3_factors(config.rope_parameters, 16), factors)


def test_a_file_whose_factors_are_not_llama3_is_refused_by_name(tmp_path):
    with pytest.raises(BackendUnavailable, match="llama3.gguf: rope_freqs that no Llama 3 RoPE scaling gives"):
        load_gguf_config(read_gguf(_file(tmp_path, np.linspace(1, 8, 8).astype(np.float32))))


PHI3 = {"rope_theta": 10000.0, "rope_type": "default"}


def test_phi3_partial_rotary_and_longrope_from_the_files_keys():
    rule = RULES["phi3"]
    assert rule(dict(PHI3), {"phi3.rope.dimension_count": 96}, {}, 128) == {**PHI3, "partial_rotary_factor": 0.75}
    long, short = np.full(48, 2.0, np.float32), np.full(48, 1.5, np.float32)
    got = rule(dict(PHI3), {"phi3.rope.dimension_count": 96, "phi3.rope.scaling.original_context_length": 4096,
                            "phi3.rope.scaling.attn_factor": 1.19},
               {"rope_factors_long.weight": long, "rope_factors_short.weight": short}, 128)
    assert got == {"rope_theta": 10000.0, "rope_type": "longrope", "partial_rotary_factor": 0.75,
                   "long_factor": [2.0] * 48, "short_factor": [1.5] * 48, "original_max_position_embeddings": 4096,
                   "attention_factor": pytest.approx(1.19)}
    with pytest.raises(ValueError, match="longrope factors without"):
        rule(dict(PHI3), {"phi3.rope.scaling.original_context_length": 4096}, {"rope_factors_long.weight": long}, 96)


def test_llama_rope_freqs_beside_another_scaling_are_refused():
    with pytest.raises(ValueError, match="beside another RoPE scaling"):
        RULES["llama"]({"rope_type": "yarn", "rope_theta": 1e4}, {}, {"rope_freqs.weight": np.ones(8)}, 16)
    assert RULES["llama"](dict(PHI3), {}, {}, 16) == PHI3


def test_a_phi3_files_longrope_becomes_its_configs(tmp_path):
    long, short = np.full(8, 3.0, np.float32), np.full(8, 1.25, np.float32)
    path = write_gguf(tmp_path / "phi3.gguf", "phi3",
                      extra={"add_sliding_window": 2048, "add_rope_scaling_orig_ctx_len": 1024},
                      tensors={"rope_factors_long.weight": long, "rope_factors_short.weight": short})
    rope = load_gguf_config(read_gguf(path)).rope_parameters
    assert rope["rope_type"] == "longrope" and rope["original_max_position_embeddings"] == 1024
    assert rope["long_factor"] == [3.0] * 8 and rope["short_factor"] == [1.25] * 8


def test_a_scaling_the_keys_name_for_every_family():
    plain = {"rope_type": "default", "rope_theta": 1e6}
    keys = {"qwen3.rope.scaling.type": "yarn", "qwen3.rope.scaling.factor": 4.0,
            "qwen3.rope.scaling.original_context_length": 32768, "qwen3.rope.scaling.yarn_beta_fast": 32.0}
    assert RULES["qwen3"](dict(plain), keys, {}, 128) == {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                                          "original_max_position_embeddings": 32768,
                                                          "beta_fast": 32.0}
    linear = {"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0}
    assert RULES["llama"](dict(plain), linear, {}, 128) == {**plain, "rope_type": "linear", "factor": 2.0}
    assert RULES["qwen2"](dict(plain), {"qwen2.rope.scaling.type": "none"}, {}, 128) == plain
    with pytest.raises(ValueError, match="RoPE scaling 'longrope' on a 'qwen2' model"):
        RULES["qwen2"](dict(plain), {"qwen2.rope.scaling.type": "longrope"}, {}, 128)
    with pytest.raises(ValueError, match="extrapolation factor"):
        RULES["qwen3"](dict(plain), {**keys, "qwen3.rope.scaling.yarn_ext_factor": 0.5}, {}, 128)


def test_gemma3_scales_its_global_layers_and_takes_its_local_base():
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    keys = {"gemma3.rope.scaling.type": "linear", "gemma3.rope.scaling.factor": 8.0,
            "gemma3.rope.freq_base_swa": 20000.0}
    assert RULES["gemma3"](rope, keys, {}, 256) == {
        "full_attention": {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}

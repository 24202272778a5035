"""gguf_rope.py: the llama3 rope_parameters recovered from llama.cpp's per-pair rope_freqs give those factors
back (Llama 3.1's and 3.2's own scalings), plain factors give none, others are refused; a GGUF that holds
rope_freqs gets them in its config (gguf_file.load_gguf_config), and one whose factors no llama3 scaling gives is
refused by name at load. (tests/engine/backends/conch/model/test_llama_cpp_files.py: a Llama 3 file made by
llama.cpp's converter gives the HF model's logprobs.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conch.engine.errors import BackendUnavailable
from conch.engine.weights.gguf_file import load_gguf_config, read_gguf
from conch.engine.weights.gguf_rope import llama3_factors, llama3_parameters
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

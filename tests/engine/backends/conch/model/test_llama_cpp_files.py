"""Files made by llama.cpp's own tools, as a user brings them: a random-weights HF model of each family (Llama,
Qwen3, Gemma 3) from its transformers config, with SmolLM2's tokenizer, converted by llama.cpp's
convert_hf_to_gguf.py (f16) and quantized by its llama-quantize (Q8_0, Q4_K_M). Conch loads each file (its
matrices kept in their blocks) and its prompt logprobs through the flattened forward agree with the HF forward
of the original weights in float32, within what the quantization moves them (the tolerances below, measured
here with a margin of about 2x).

Needs `make llama-cpp` (scripts/setup-llama-cpp.sh: the llama.cpp build: 57 min here, 2 busy cores); skipped
without it. Slow: each family's conversion and two quantizations take ~10-20 s."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

from conch.engine.backends.conch import loader, native
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.quantized import QuantLinear
from conch.engine.repository import ModelConfig
from conch.engine.weights import ensure_smollm2
from tests.engine.backends.conch.steps import Occupant, make_step

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[5]
LLAMA_CPP = Path(os.environ.get("LLAMA_CPP_DIR", ROOT / ".llama-cpp"))
QUANTIZE = LLAMA_CPP / "bin" / "llama-quantize"
# the converter's python: the setup's venv, else this one (the same torch / transformers / numpy pins; the
# converter also imports sentencepiece for any Llama)
CONVERTER_PY = next((str(p) for p in [ROOT / ".venv-llama-cpp" / "bin" / "python"] if p.exists()), sys.executable)

# K-quants need rows of a multiple of 256 values: hidden and intermediate sizes are
SHAPE = dict(vocab_size=49152, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, initializer_range=0.1)
CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(**SHAPE, num_hidden_layers=2, tie_word_embeddings=False),
    # Llama 3.1+'s scaled RoPE, which llama.cpp's converter writes as a rope_freqs tensor of per-pair factors: an
    # original context of 64 so that the prompt's positions see its scaled and smoothed pairs
    "llama3": lambda: transformers.LlamaConfig(**SHAPE, num_hidden_layers=2, tie_word_embeddings=False,
                                               rope_parameters=dict(rope_type="llama3", rope_theta=10000.0,
                                                                    factor=8.0, low_freq_factor=1.0,
                                                                    high_freq_factor=4.0,
                                                                    original_max_position_embeddings=64)),
    "mistral": lambda: transformers.MistralConfig(**SHAPE, num_hidden_layers=2, tie_word_embeddings=False,
                                                  sliding_window=None),
    # Granite: llama's tensors and four multipliers (granite.attention.scale, .embedding_scale, .residual_scale,
    # .logit_scale)
    "granite": lambda: transformers.GraniteConfig(**SHAPE, num_hidden_layers=2, tie_word_embeddings=False,
                                                  pad_token_id=0, embedding_multiplier=4.0, attention_multiplier=0.1,
                                                  residual_multiplier=0.5, logits_scaling=2.0),
    # SmolLM3: llama's tensors with every 4th layer's RoPE left out (llama.cpp's smollm3 fixes that step at 4)
    "smollm3": lambda: transformers.SmolLM3Config(**SHAPE, num_hidden_layers=4, tie_word_embeddings=False,
                                                  pad_token_id=0, use_sliding_window=False),
    # head_dim 128 as every Qwen3 has: transformers' GGUF config does not read qwen3's key_length (its default: 128)
    "qwen3": lambda: transformers.Qwen3Config(**SHAPE, num_hidden_layers=2, head_dim=128, tie_word_embeddings=False),
    # YaRN (Qwen2.5 / Qwen3 past their native context), which llama.cpp writes as qwen3.rope.scaling.* keys
    "qwen3-yarn": lambda: transformers.Qwen3Config(
        **SHAPE, num_hidden_layers=2, head_dim=128, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64)),
    # Phi-3's partial rotary (Phi-4-mini rotates 3/4 of a head) and longrope (Phi-3.5, Phi-4-mini), which llama.cpp
    # writes as phi3.rope.dimension_count and rope_factors_long / _short tensors; short factors apply within
    # the original context (the prompt here), long past it
    "phi3": lambda: transformers.Phi3Config(**SHAPE, num_hidden_layers=2, tie_word_embeddings=False, pad_token_id=0,
                                            rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                                 partial_rotary_factor=0.75)),
    "phi3-longrope": lambda: transformers.Phi3Config(
        **{**SHAPE, "max_position_embeddings": 8192}, num_hidden_layers=2, tie_word_embeddings=False,
        pad_token_id=0, original_max_position_embeddings=2048,
        rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=2048,
                             short_factor=[1.0 + 0.1 * i for i in range(32)],
                             long_factor=[2.0 + 0.1 * i for i in range(32)])),
    # llama.cpp's Gemma 3: a global layer every 6th, its window from the config, q scaled by head_dim^-1/2; the
    # GGUF has no query_pre_attn_scalar (transformers reads 256): head_dim 256, as Gemma 3 1B-12B have
    "gemma3": lambda: transformers.Gemma3TextConfig(**SHAPE, num_hidden_layers=6, head_dim=256,
                                                    query_pre_attn_scalar=256, sliding_window=16),
    # Gemma 3 4B-27B: the global layers' RoPE scaled linearly (gemma3.rope.scaling.*)
    "gemma3-linear": lambda: transformers.Gemma3TextConfig(
        **SHAPE, num_hidden_layers=6, head_dim=256, query_pre_attn_scalar=256, sliding_window=16,
        rope_parameters={"full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1e6),
                         "sliding_attention": dict(rope_type="default", rope_theta=10000.0)}),
}
# max |logprob difference| over the prompt and the whole vocabulary, against the float32 HF forward of the
# unquantized weights: a peaked model (weights of std 0.1, logits of tens) moves its unlikely tokens' logprobs by
# units under 4-bit weights. Measured here (llama): F16 0.020, Q8_0 0.52, Q4_K_M 7.2
TOLERANCE = {"F16": 0.05, "Q8_0": 1.0, "Q4_K_M": 12.0}
DEPTH = {"smollm3": 2.0}      # a model of 4 layers (the NoPE step is 4) against the 2-layer ones: twice the rounding
PROMPT = [1] + [(i * 97) % 40000 + 100 for i in range(60)]


def _converter() -> Path | None:
    found = sorted(LLAMA_CPP.glob("llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """family -> (the HF model in float32, {type: its GGUF file})."""
    if not QUANTIZE.exists() or _converter() is None:
        pytest.skip("no llama.cpp build here (make llama-cpp; make test-llama-cpp runs this file)")
    if subprocess.run([CONVERTER_PY, "-c", "import sentencepiece"], capture_output=True).returncode:
        pytest.skip(f"the converter's python {CONVERTER_PY} has no sentencepiece (make llama-cpp installs it)")
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer, root, out = AutoTokenizer.from_pretrained(ensure_smollm2()), tmp_path_factory.mktemp("made"), {}
    for name, config in CONFIGS.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config(), dtype=torch.float32).eval()
        for p in model.parameters():                    # norms away from their identity, so a misread one shows
            if p.dim() == 1:
                p.data.uniform_(-0.5, 0.5) if name.startswith("gemma3") else p.data.uniform_(0.5, 1.5)
        folder = root / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        if name.startswith("phi3"):             # the converter's Phi-3 reads a GPT-2 style vocabulary as Phi-4's
            settings = json.loads((folder / "tokenizer_config.json").read_text())
            (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": "GPT2Tokenizer"}))
        files = {"F16": root / f"{name}-f16.gguf"}
        subprocess.run([CONVERTER_PY, str(_converter()), str(folder), "--outtype", "f16", "--outfile",
                        str(files["F16"])], check=True, capture_output=True)
        for qtype in ("Q8_0", "Q4_K_M"):
            files[qtype] = root / f"{name}-{qtype.lower()}.gguf"
            subprocess.run([str(QUANTIZE), str(files["F16"]), str(files[qtype]), qtype], check=True,
                           capture_output=True)
        out[name] = (model, files)
    return out


def _reference(model) -> torch.Tensor:
    with torch.inference_mode():
        return torch.log_softmax(model(input_ids=torch.tensor([PROMPT])).logits[0].float(), -1)


def _conch(path: Path) -> tuple[torch.Tensor, object]:
    config = ModelConfig(name="m", weights=str(path), dtype="float32", tokenizer=str(ensure_smollm2()))
    model = loader.load(config).model
    forward, c = LlamaForward(model), model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, forward.dtype, 2**24, 1,
                     blocked=forward.kernels.blocked)
    slot = kv.admit(Occupant(), 128)
    logits = forward(make_step([(slot, 0, PROMPT)], list(range(len(PROMPT)))), kv)
    return torch.log_softmax(logits, -1), model


@pytest.mark.parametrize("qtype", sorted(TOLERANCE))
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_llama_cpp_file_gives_the_hf_logprobs(made, name, qtype):
    model, files = made[name]
    want = _reference(model)
    assert want.max(-1).values.mean() - want.mean() > 2.0          # peaked enough for a wrong weight to show
    got, served = _conch(files[qtype])
    if qtype != "F16":
        assert isinstance(served.model.layers[0].mlp.down_proj, QuantLinear)
    diff, tolerance = (got - want).abs().max().item(), TOLERANCE[qtype] * DEPTH.get(name, 1.0)
    assert diff <= tolerance, (name, qtype, diff)
    with torch.inference_mode():           # the HF forward prompt logprobs run (gguf_skeleton.py's, built now)
        scored = torch.log_softmax(served(input_ids=torch.tensor([PROMPT])).logits[0].float(), -1)
    diff = (scored - want).abs().max().item()
    assert diff <= tolerance, (name, qtype, "HF forward", diff)

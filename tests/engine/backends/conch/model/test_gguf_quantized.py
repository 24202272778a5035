"""A GGUF's quantized matrices served in place (gguf_layers.py, quantized.py): the model keeps the file's
blocks, and Conch's prompt logprobs through the flattened forward agree with a float32 reference that
dequantizes the same file (gguf's dequantizer, through transformers' GGUF loader)."""
from __future__ import annotations

import pytest
import torch

from conch.engine.backends.conch import loader, native
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.quantized import QuantEmbedding, QuantLinear
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.repository import ModelConfig
from conch.engine.weights import ensure_smollm2
from tests.engine.backends.conch.steps import Occupant, make_step
from tests.gguf_files import small_llama, write_llama_gguf

TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
PROMPT = [1] + [(i * 97) % 40000 + 100 for i in range(60)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    root = tmp_path_factory.mktemp("gguf")
    model = small_llama(hidden=256, inter=512, init=0.1)
    return {t: write_llama_gguf(model, root / f"m-{t}.gguf", t) for t in TYPES}


def _reference(path) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    with torch.inference_mode():
        return torch.log_softmax(model(input_ids=torch.tensor([PROMPT])).logits[0].float(), -1)


def _conch(path, dtype: str) -> torch.Tensor:
    config = ModelConfig(name="m", weights=str(path), dtype=dtype, tokenizer=str(ensure_smollm2()))
    model = loader.load(config).model                       # its vocabulary is SmolLM2's: that folder's is quicker
    layers = model.model.layers
    assert all(isinstance(getattr(layers[0].self_attn, p), QuantLinear) for p in ("q_proj", "k_proj", "v_proj"))
    assert isinstance(layers[-1].mlp.down_proj, QuantLinear) and isinstance(model.lm_head, QuantLinear)
    forward, c = LlamaForward(model), model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, forward.dtype, 2**24, 1,
                     blocked=forward.kernels.blocked)
    slot = kv.admit(Occupant(), 128)
    logits = forward(make_step([(slot, 0, PROMPT)], list(range(len(PROMPT)))), kv)
    return torch.log_softmax(logits, -1)


# make test runs one block layer and one K-quant (the two kernels' families); the others run with -m slow
@pytest.mark.parametrize("qtype", [t if t in ("Q8_0", "Q4_K") else pytest.param(t, marks=pytest.mark.slow)
                                   for t in TYPES])
def test_prompt_logprobs_agree_with_the_dequantized_float32_reference(files, qtype):
    want = _reference(files[qtype])
    assert want.max(-1).values.mean() - want.mean() > 2.0          # peaked enough for a wrong weight to show
    # bf16 (the int8 product, activations rounded as llama.cpp rounds them) on two types: the bf16 activations move the
    # peaked model's logprobs most (Q8_0: 0.27 with the float32 product, 0.30 with the int8 one)
    for dtype, tol in (("float32", 1e-3), ("bfloat16", 0.4))[:1 if qtype not in ("Q4_K", "Q8_0") else 2]:
        got = _conch(files[qtype], dtype)
        diff = (got - want).abs().max().item()
        assert diff <= tol, (qtype, dtype, diff)


def test_a_tied_models_embedding_and_head_read_the_files_blocks(tmp_path):
    """No output.weight in the file: the lookup and the head share token_embd's blocks (no bf16 copy of the
    vocabulary, which for Llama 3.2 1B is 0.5 GB and most of a decode step's bytes), and the logprobs agree."""
    path = write_llama_gguf(small_llama(hidden=256, inter=512, init=0.1, tied=True), tmp_path / "tied.gguf", "Q8_0")
    model = loader.load(ModelConfig(name="m", weights=str(path), dtype="float32",
                                    tokenizer=str(ensure_smollm2()))).model
    embedding, head = model.model.embed_tokens, model.lm_head
    assert isinstance(embedding, QuantEmbedding) and isinstance(head, QuantLinear)
    assert head.matrix.packed.data_ptr() == embedding.matrix.packed.data_ptr()
    got, want = _conch(path, "float32"), _reference(path)
    assert (got - want).abs().max().item() <= 1e-3

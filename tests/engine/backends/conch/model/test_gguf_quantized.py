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
from conch.engine.weights.gguf_file import load_gguf_dequantized, read_gguf
from tests.gguf_files import small_granite, small_llama, small_phi3, small_smollm3, write_llama_gguf

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


def _served(path, dtype: str):
    """The file's model as the loader serves it, every matrix of a layer and the head in the file's blocks."""
    config = ModelConfig(name="m", weights=str(path), dtype=dtype, tokenizer=str(ensure_smollm2()))
    model = loader.load(config).model                       # its vocabulary is SmolLM2's: that folder's is quicker
    for block in (model.model.layers[0], model.model.layers[-1]):
        matrices = [m for m in block.modules() if isinstance(m, (torch.nn.Linear, QuantLinear))]
        assert len(matrices) >= 4 and all(isinstance(m, QuantLinear) for m in matrices), matrices
    assert isinstance(model.lm_head, QuantLinear)
    return model


def _conch(path, dtype: str, model=None) -> torch.Tensor:
    model = model if model is not None else _served(path, dtype)
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


@pytest.mark.parametrize("qtype", ["F16", "Q8_0", "Q4_K"])
def test_a_phi3_files_fused_qkv_and_gate_up_stay_in_their_blocks(tmp_path, qtype):
    """Phi-3's one attn_qkv and one ffn_up ([gate; up]) a layer: kept in the file's blocks, q / k packed in the
    forward's RoPE pairs (no copy), and the logprobs of the partial-rotary model agree with the dequantized
    float32 reference (transformers' loader under the file's config: its rope.dimension_count read); an F16
    file's fused matrices are plain tensors in gguf_skeleton's module tree."""
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    path = write_llama_gguf(small_phi3(), tmp_path / f"phi3-{qtype}.gguf", qtype)
    if qtype == "F16":
        model = loader.load(ModelConfig(name="m", weights=str(path), dtype="float32",
                                        tokenizer=str(ensure_smollm2()))).model
        assert not any(isinstance(m, QuantLinear) for m in model.modules())
    else:
        model = _served(path, "float32")
        block = model.model.layers[0]
        assert isinstance(block.self_attn.qkv_proj, QuantLinear) and isinstance(block.mlp.gate_up_proj, QuantLinear)
        assert LlamaForward(model).layers[0].qkv.parts[0] is block.self_attn.qkv_proj.matrix
    with torch.inference_mode():
        reference = load_gguf_dequantized(read_gguf(path), torch.float32)
        want = torch.log_softmax(reference(input_ids=torch.tensor([PROMPT])).logits[0].float(), -1)
    assert want.max(-1).values.mean() - want.mean() > 2.0
    diff = (_conch(path, "float32", model) - want).abs().max().item()
    assert diff <= 1e-3, (qtype, diff)


# architectures transformers' GGUF loader does not read (gguf_config.AS_LLAMA): the model, and what its config
# must read from the file
OWN = {"smollm3": (small_smollm3, {"no_rope_layers": [1, 1, 1, 0]}),
       "granite": (small_granite, {"embedding_multiplier": 4.0, "attention_multiplier": 0.125,
                                   "residual_multiplier": 0.5, "logits_scaling": 2.0})}


@pytest.mark.parametrize("name", sorted(OWN))
def test_a_file_of_an_architecture_read_as_llamas_is_served_from_its_blocks(tmp_path, name):
    """A `smollm3` (every 4th layer without RoPE, as llama.cpp fixes it) or `granite` (its four multipliers;
    quantized matrices take the q and residual ones on their outputs, quantized.Scaled) GGUF: its config the
    family's, its matrices kept in their blocks (q / k as llama.cpp permutes them, packed without a copy), and
    its logprobs those of the HF model whose matrices are the file's Q8_0 values (gguf's own quantize and
    dequantize of the original weights)."""
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    make, fields = OWN[name]
    original = make()
    path = write_llama_gguf(original, tmp_path / f"{name}-Q8_0.gguf", "Q8_0")
    model = _served(path, "float32")
    assert model.config.model_type == name
    assert {key: getattr(model.config, key) for key in fields} == fields        # (float32 keys: exact here)
    parts = LlamaForward(model).layers[0].qkv
    assert getattr(parts, "product", parts).parts[0] is model.model.layers[0].self_attn.q_proj.matrix
    q8 = GGMLQuantizationType.Q8_0
    with torch.no_grad():
        for p in original.parameters():
            if p.dim() == 2:
                p.copy_(torch.from_numpy(dequantize(quantize(p.numpy(), q8), q8)))
        want = torch.log_softmax(original(input_ids=torch.tensor([PROMPT])).logits[0].float(), -1)
    assert want.max(-1).values.mean() - want.mean() > 2.0
    diff = (_conch(path, "float32", model) - want).abs().max().item()
    assert diff <= 1e-3, diff

"""The flattened Llama runner: its forward equals the HF model's, chunked prefill and batching change no
greedy output (the slot KV store's own rules: test_slot_store.py)."""
from __future__ import annotations

import asyncio

import pytest
import torch
from transformers import AutoModelForCausalLM

from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.backends.conch.runners.flat_runner import FlatRunner
from conch.engine.backends.conch.runners.hf_runner import HFRunner
from conch.engine.backends.conch.kv.slot_store import SlotKVStore
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.weights import ensure_tiny_model
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from tests.engine.backends.conch.steps import Occupant, make_step


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(ensure_tiny_model(), dtype=torch.float32).eval()




def test_whole_chunked_and_batched_decode_logits_equal_the_hf_forward(model):
    forward = LlamaForward(model)
    c = model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.float32, 2**24, 4)
    prompt = list(range(100, 190))
    with torch.inference_mode():
        ref = model(input_ids=torch.tensor([prompt + [5]])).logits[0]
    a, b = kv.admit(Occupant(), 128), kv.admit(Occupant(), 128)
    whole = forward(make_step([(a, 0, prompt)], [89]), kv)
    forward(make_step([(b, 0, prompt[:50])], [49]), kv)                    # the same prompt in two chunks
    chunked = forward(make_step([(b, 50, prompt[50:])], [39]), kv)
    both = forward(make_step([(a, 90, [5]), (b, 90, [5])], [0, 1]), kv)     # two decode rows in one call
    for got, want in ((whole[0], ref[89]), (chunked[0], ref[89]), (both[0], ref[90]), (both[1], ref[90])):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


async def _greedy(backend, ids: list[int], rid: str, n: int = 8) -> list[int]:
    req = GenerationRequest(id=rid, model="m", prompt_token_ids=tuple(ids),
                            params=SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    return [t async for d in backend.generate(req) for t in d.token_ids]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])      # bfloat16: decode rows run the native kernel
async def test_streams_and_a_long_prompt_prefilled_in_chunks_equal_each_alone(dtype):
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype=dtype, max_step_tokens=40,
                                              prefix_cache_mb=0))
    await backend.start()
    try:
        assert isinstance(backend.runner, FlatRunner)
        kernels = backend.runner.forward_pass.kernels
        assert (kernels.decode is not None or kernels.blocked) == (dtype == "bfloat16")
        prompts = [list(range(200 + i, 220 + 3 * i)) for i in range(6)] + [list(range(300, 450))]   # last: 150
        alone = [await _greedy(backend, p, f"a{i}") for i, p in enumerate(prompts)]
        steps = backend.core.steps
        together = await asyncio.gather(*[_greedy(backend, p, f"t{i}") for i, p in enumerate(prompts)])
        assert together == alone
        assert backend.core.steps - steps >= 150 // 40            # the long prompt took several steps to prefill
        for _ in range(1000):        # finished rows leave (and free their slots) at the engine's next step
            if not backend.scheduler.has_work:
                break
            await asyncio.sleep(0.01)
        kv = backend.runner.kv
        assert backend.runner.kv_usage == 0.0 and kv.nbytes <= kv.budget_bytes
        assert (kv.nbytes == 0) == kv.zeroed             # an unzeroed store keeps the pages its tokens touched
    finally:
        await backend.stop()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
async def test_prompts_that_arrive_together_compute_their_shared_head_once(dtype):
    """kv/shared_heads.py: six prompts sharing a 60-token head, sent at once: one computes it, the five others
    wait a step and copy it from its slot; each one's greedy tokens are those it gets alone (no sharing)."""
    head = list(range(400, 460))
    prompts = [head + [500 + i, 600 + i, 700 + i] for i in range(6)]
    plain = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype=dtype, prefix_cache_mb=0))
    await plain.start()
    try:
        alone = [await _greedy(plain, p, f"a{i}") for i, p in enumerate(prompts)]
        assert plain.runner.prefixes.hit_tokens == 0
    finally:
        await plain.stop()
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype=dtype))
    await backend.start()
    try:
        together = await asyncio.gather(*[_greedy(backend, p, f"t{i}") for i, p in enumerate(prompts)])
        assert together == alone
        assert backend.runner.prefixes.hit_tokens == 5 * len(head)          # five heads copied, none computed
    finally:
        await backend.stop()


def test_a_next_turn_whose_kept_slot_holds_the_shared_head_does_not_wait(model):
    """FlatRunner.waits: a newcomer waits for a prefilling sequence's shared head only where its kept slot (or the
    prefix cache) holds less of its prompt."""
    from conch.engine.backends.conch.core.sequence import Sequence
    from conch.engine.backends.conch.kv.prefix_cache import PrefixCache

    def seq(rid: str, n: int) -> Sequence:                   # prompts range(n): one shared head
        req = GenerationRequest(id=rid, model="m", prompt_token_ids=tuple(range(n)), params=SamplingParams())
        return Sequence(request=req, index=0, prompt_ids=list(range(n)), eos_ids=frozenset(), max_total=4096)

    runner = FlatRunner(model, 4, 2**24, PrefixCache(2**20))
    system = list(range(40))
    other = seq("other", 48)
    assert runner.admit(other) and other.computed == 0        # prefilling, its 47-token head not computed
    turn = seq("turn", 100)
    assert runner.waits(turn, [other])
    runner.kv.kept[3] = tuple(system[:16]), torch.arange(90)  # a freed slot kept 90 of its tokens
    assert runner.kv.kept_head(turn.key_ids) == 90 and not runner.waits(turn, [other])


async def test_other_architectures_and_runner_hf_use_the_hf_forward():
    backend = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="float32",
                                              runner="hf"))
    await backend.start()
    try:
        assert isinstance(backend.runner, HFRunner) and backend.runner.whole_prompts
        assert len(await _greedy(backend, list(range(200, 230)), "h")) == 8
    finally:
        await backend.stop()


def test_qwen2_qkv_biases_follow_their_reordered_rows():
    """Qwen2 has q/k/v biases: the fused projection reorders them with its q/k rows (RoPE pairs)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    qwen = Qwen2ForCausalLM(Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=256)).eval()
    with torch.no_grad():
        for proj in (a for layer in qwen.model.layers for a in (layer.self_attn.q_proj, layer.self_attn.k_proj)):
            proj.bias.normal_(std=0.5)                      # zero-initialised biases would prove nothing
    forward = LlamaForward(qwen)
    kv = SlotKVStore(2, 2, forward.head_dim, torch.float32, 2**24, 2)
    ids = list(range(10, 60))
    slot = kv.admit(Occupant(), 64)
    got = forward(make_step([(slot, 0, ids)], [49]), kv)
    with torch.inference_mode():
        want = qwen(input_ids=torch.tensor([ids])).logits[0, 49]
    torch.testing.assert_close(got[0], want, atol=1e-4, rtol=1e-4)


def test_a_bf16_model_with_64_wide_heads_prefills_through_the_native_kernel():
    """head_dim 64 in bf16: prefill chunks run native/prefill_attention.cpp. Whole and chunked prefill give
    bit-equal logits (each row walks the same key blocks), close to HF's own bf16 forward."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=192, intermediate_size=256, num_hidden_layers=2,
                                         num_attention_heads=3, num_key_value_heads=1,
                                         max_position_embeddings=512)).to(torch.bfloat16).eval()
    forward = LlamaForward(llama)
    if forward.kernels.prefill is None:
        pytest.skip("no native prefill kernel on this CPU (AVX512-BF16)")
    kv = SlotKVStore(2, 1, forward.head_dim, torch.bfloat16, 2**24, 2)
    ids = [(7 * i) % 290 + 5 for i in range(150)]
    a, b = kv.admit(Occupant(), 160), kv.admit(Occupant(), 160)
    whole = forward(make_step([(a, 0, ids)], [63, 149]), kv)
    first = forward(make_step([(b, 0, ids[:64])], [63]), kv)
    rest = forward(make_step([(b, 64, ids[64:])], [85]), kv)
    assert torch.equal(first[0], whole[0]) and torch.equal(rest[0], whole[1])
    with torch.inference_mode():
        want = llama(input_ids=torch.tensor([ids])).logits[0, [63, 149]].float()
    torch.testing.assert_close(whole, want, atol=0.03, rtol=0.01)   # one token changed 60 back moves them 0.13


def test_runner_and_kv_store_are_typed_settings_refused_at_load_when_unknown():
    from conch.engine.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="config key 'runner' must be one of auto, hf, not 'flat'"):
        ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "runner": "flat"})
    with pytest.raises(InvalidRequest, match="config key 'kv_store' must be one of auto, reserved, zeroed"):
        ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "kv_store": "paged"})


async def test_a_reserved_store_that_sdpa_would_read_is_refused_and_zeroed_is_taken_as_asked():
    """float32 has no native attention kernel: SDPA reads masked columns, so a reserved (unwritten) store is
    refused when the model loads; an explicit zeroed store is what it runs."""
    from conch.engine.errors import BackendUnavailable

    refused = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="float32", kv_store="reserved"))
    with pytest.raises(BackendUnavailable, match="reserved"):
        await refused.start()
    await refused.stop()
    zeroed = ConchBackend(ModelConfig(name="m", weights="builtin:tiny", dtype="float32", kv_store="zeroed"))
    await zeroed.start()
    try:
        assert isinstance(zeroed.runner, FlatRunner) and zeroed.runner.kv.zeroed
    finally:
        await zeroed.stop()

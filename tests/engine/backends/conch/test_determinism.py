"""Batch-invariant greedy decoding (llama.py's Numerics): SmolLM2-135M bf16 answers every prompt with the same
greedy tokens alone, again from its kept slot, inside a batch of 16 different requests, prefilled in small
chunks beside other requests, and after a prefix-cache hit; and a row's logits are the same bits whatever step
computes it."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch

from conch.engine.backends.conch.model import matmul_path
from conch.engine.backends.conch.backend import ConchBackend
from conch.engine.backends.conch.kv.prefix_cache import BLOCK
from conch.engine.backends.conch.kv.slot_store import SlotKVStore, StorePolicy
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationRequest, SamplingParams
from tests.engine.backends.conch.steps import Occupant, make_step

TOKENS = 12
_gen = torch.Generator().manual_seed(33)
PROMPTS = [torch.randint(100, 40000, (n,), generator=_gen).tolist() for n in (20, 40, 95, 150)]
OTHERS = [torch.randint(100, 40000, (n,), generator=_gen).tolist() for n in range(20, 140, 10)]   # 12 more
LONG = torch.randint(100, 40000, (5 * BLOCK + 30,), generator=_gen).tolist()     # long enough to be cached


async def _greedy(backend: ConchBackend, ids: list[int], n: int = TOKENS) -> list[int]:
    req = GenerationRequest(id=f"r{id(ids)}-{len(ids)}", model="m", prompt_token_ids=tuple(ids),
                            params=SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    return [t async for d in backend.generate(req) for t in d.token_ids]


async def _started(config: ModelConfig) -> ConchBackend:
    backend = ConchBackend(config)
    await backend.start()
    assert backend.runner.forward_pass.kernels.matmul == matmul_path.choose(torch.bfloat16)   # the pinned path
    if not backend.runner.forward_pass.kernels.blocked:
        await backend.stop()
        pytest.skip("no native prefill kernel here (AVX512-BF16 and a C++ compiler): SDPA is not batch-invariant")
    return backend


@pytest.fixture(scope="module", params=[(True, "auto"), (False, "auto"), (False, "avx512")],
                ids=["batch_invariant", "default", "default-avx512"])
def invariant(request) -> Iterator[bool]:
    """The switch on, and the default: where the native kernels serve (here: bf16, head_dim 64), the default
    path is batch-invariant too (llama.py's Numerics); the switch adds only oneDNN's lone-row guard. Each on
    the matmul path CONCH_MATMUL_PATH names (auto: AMX where the CPU has it), pinned while its backends load."""
    switch, path = request.param
    if path != "auto" and matmul_path.find(path, torch.bfloat16) is None:
        pytest.skip(f"the {path} matmul path does not run here")
    with pytest.MonkeyPatch.context() as env:
        env.setenv(matmul_path.ENV, path)
        yield switch


@pytest.fixture(scope="module")
async def cached(invariant):
    """The default config: kept slots and the prefix cache on, whole prompts in one step."""
    backend = await _started(ModelConfig(name="m", weights="builtin:smollm2", dtype="bfloat16",
                                         batch_invariant=invariant))
    yield backend
    await backend.stop()


@pytest.fixture(scope="module")
async def chunked(invariant):
    """No cache of any kind, prompts prefilled 24 tokens a step."""
    backend = await _started(ModelConfig(name="m", weights="builtin:smollm2", dtype="bfloat16", max_step_tokens=24,
                                         prefix_cache_mb=0, batch_invariant=invariant))
    yield backend
    await backend.stop()


@pytest.fixture(scope="module")
async def alone(chunked) -> list[list[int]]:
    """Each prompt's greedy tokens, alone and cold."""
    return [await _greedy(chunked, p) for p in PROMPTS + [LONG]]


async def test_alone_then_from_its_kept_slot(cached, alone):
    for prompt, want in zip(PROMPTS, alone, strict=False):
        assert await _greedy(cached, prompt) == want                 # cold, whole in one step
        hits = cached.stats().prefix_cache_hits
        assert await _greedy(cached, prompt) == want                 # its kept slot: only the last token computed
        assert cached.stats().prefix_cache_hits - hits == len(prompt) - 1


async def test_inside_a_batch_of_16_different_requests(cached, alone):
    got = await asyncio.gather(*[_greedy(cached, p) for p in PROMPTS + OTHERS])
    assert got[:len(PROMPTS)] == alone[:len(PROMPTS)]


async def test_chunked_prefill_beside_other_requests(chunked, alone):
    """24-token steps: decode rows share steps with other prompts' chunks, each prompt is cut several ways."""
    got = await asyncio.gather(*[_greedy(chunked, p) for p in OTHERS[:5] + PROMPTS])
    assert got[5:] == alone[:len(PROMPTS)]


BURNER = "import torch\ntorch.set_num_threads(2)\na = torch.randn(384, 384)\nwhile True:\n    a @ a"


async def test_under_concurrent_load(cached, chunked, alone):
    """Another process keeps both cores busy (as a shared CI machine or a second server does) while a batch of
    16 and chunked prefills run: the kernels' row order and the step's make-up never depend on timing."""
    burner = subprocess.Popen([sys.executable, "-c", BURNER])
    try:
        got = await asyncio.gather(*[_greedy(cached, p) for p in PROMPTS + OTHERS[:4]])
        assert got[:len(PROMPTS)] == alone[:len(PROMPTS)]
        got = await asyncio.gather(*[_greedy(chunked, p) for p in OTHERS[4:6] + PROMPTS])
        assert got[2:] == alone[:len(PROMPTS)]
    finally:
        burner.kill()
        burner.wait()


async def test_after_a_prefix_cache_hit(cached, alone):
    """A prompt sharing LONG's first blocks runs first; LONG then starts from the prefix cache (its head's KV
    copied into a fresh slot: the shared head is under half of what that prompt's slot keeps)."""
    head = 4 * BLOCK
    await _greedy(cached, LONG[:head] + OTHERS[-1] * 3, n=1)
    hits = cached.stats().prefix_cache_hits
    assert await _greedy(cached, LONG) == alone[-1]
    assert cached.stats().prefix_cache_hits - hits == head




def test_a_rows_logits_are_the_same_bits_in_any_step(cached):
    """The prompt's last token: in its whole prompt, as a lone decode row, beside another prompt's chunk; then
    its next token alone and among 14 decode rows."""
    forward = cached.runner.forward_pass
    c = cached.runner.model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.bfloat16, 2**27, 20,
                     StorePolicy.RESERVED, forward.kernels.blocked)
    slots = [kv.admit(Occupant(), 256) for _ in range(20)]
    prompt, other = PROMPTS[3], LONG[:200]
    n = len(prompt)
    last = [forward(make_step([(slots[0], 0, prompt)], [n - 1]), kv)[0]]
    forward(make_step([(slots[1], 0, prompt[:-1])], [n - 2]), kv)
    last.append(forward(make_step([(slots[1], n - 1, prompt[-1:])], [0]), kv)[0])
    last.append(forward(make_step([(slots[2], 0, other), (slots[3], 0, prompt)], [199, 199 + n]), kv)[1])
    following = [forward(make_step([(slots[0], n, [5])], [0]), kv)[0]]
    crowd = [(slots[1], n, [5]), (slots[3], n, [5])] + [(s, 0, [7 + s]) for s in slots[6:18]]
    following.append(forward(make_step(crowd, list(range(14))), kv)[1])
    for rows in (last, following):
        assert all(torch.equal(r, rows[0]) for r in rows[1:])


def test_a_verify_span_gives_each_row_the_bits_of_decoding_it(cached):
    """Speculative decoding's verify pass: k + 1 tokens of one sequence in one span, logits at every one, equal
    to decoding them one step at a time (each token attends to its slot's columns up to its own position)."""
    forward = cached.runner.forward_pass
    c = cached.runner.model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.bfloat16, 2**26, 2,
                     StorePolicy.RESERVED, forward.kernels.blocked)
    a, b = kv.admit(Occupant(), 128), kv.admit(Occupant(), 128)
    prompt, drafts = PROMPTS[1], [5, 901, 77, 4000]
    n = len(prompt)
    for slot in (a, b):
        forward(make_step([(slot, 0, prompt)], [n - 1]), kv)
    verify = forward(make_step([(a, n, drafts)], list(range(len(drafts)))), kv)
    one_by_one = [forward(make_step([(b, n + i, [t])], [0]), kv)[0] for i, t in enumerate(drafts)]
    assert all(torch.equal(v, d) for v, d in zip(verify, one_by_one, strict=True))


def test_batch_invariant_is_a_typed_setting_of_the_transformers_backend():
    from conch.engine.errors import InvalidRequest

    assert ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "batch_invariant": "true"}).batch_invariant
    with pytest.raises(InvalidRequest, match="config key 'batch_invariant' must be"):
        ModelConfig.from_mapping("m", {"weights": "builtin:tiny", "batch_invariant": "sometimes"})
    with pytest.raises(InvalidRequest, match="'batch_invariant' is the own engine's"):
        ModelConfig.from_mapping("m", {"backend": "vllm", "weights": "x", "batch_invariant": True})

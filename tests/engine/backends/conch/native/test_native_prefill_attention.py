"""The native prefill-attention kernels (native/prefill_attention.cpp, AVX512-BF16 registers; tile_attention.cpp,
AMX tiles; both each where this CPU has it): equal to causal SDPA over the chunk's slot, bit for bit the same
however a prompt is cut into chunks or whether its rows come as decode rows, and blind to the store past the
chunk."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tests.engine.backends.conch.native_modules import compiled


SLOTS, CAPACITY = 3, 700


KERNELS = ("prefill_attention", "tile_attention")


def module(name: str):
    found = compiled(name)
    if not found.available():
        pytest.skip(f"this CPU or build cannot run {name}")
    return found


@pytest.fixture(scope="module", params=KERNELS)
def kernel(request):
    return module(request.param).prefill_attention


@pytest.fixture(scope="module", params=KERNELS)
def both(request):
    return module(request.param)


def _store(G: int, D: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(SLOTS, G, CAPACITY, D, generator=gen).to(torch.bfloat16) for _ in range(2))


def _queries(n: int, H: int, G: int, D: int) -> torch.Tensor:
    """(n, H, D), a view with the runner's layout: q beside k in one (n, H + G, D) projection."""
    return torch.randn(n, H + G, D, generator=torch.Generator().manual_seed(n)).to(torch.bfloat16)[:, :H]


def _run(kernel, q, k, v, slot: int, start: int) -> torch.Tensor:
    out = torch.empty(q.shape, dtype=torch.bfloat16)
    kernel(q, k, v, slot, start, q.shape[2] ** -0.5, out)
    return out


def _reference(q, k, v, slot: int, start: int) -> torch.Tensor:
    """float32 SDPA: query t (position start + t) sees columns 0..start+t of the slot."""
    end = start + q.shape[0]
    mask = torch.arange(end).unsqueeze(0) <= torch.arange(start, end).unsqueeze(1)
    o = F.scaled_dot_product_attention(q.float().transpose(0, 1).unsqueeze(0), k[slot:slot + 1, :, :end].float(),
                                       v[slot:slot + 1, :, :end].float(), attn_mask=mask, enable_gqa=True)
    return o[0].transpose(0, 1)


@pytest.mark.parametrize("H, G, D, start, n", [(9, 3, 64, 0, 600), (9, 3, 64, 437, 250), (8, 2, 128, 63, 77),
                                               (4, 4, 64, 5, 2), (6, 1, 64, 0, 17)])
def test_prefill_attention_equals_causal_sdpa(kernel, H, G, D, start, n):
    k, v = _store(G, D, seed=H + D)
    q = _queries(n, H, G, D)
    out = _run(kernel, q, k, v, 1, start)
    torch.testing.assert_close(out.float(), _reference(q, k, v, 1, start), atol=2e-2, rtol=2e-2)


def test_a_prompt_cut_into_chunks_gives_its_rows_bit_for_bit(kernel):
    """What chunked prefill and prefix reuse rely on: each row walks the same key blocks whatever its chunk."""
    k, v = _store(3, 64, seed=1)
    q = _queries(650, 9, 3, 64)
    whole = _run(kernel, q, k, v, 2, 0)
    for cuts in ((1, 64, 65), (100, 333), (16, 17, 31, 600, 649)):
        pieces, start = [], 0
        for end in (*cuts, 650):
            pieces.append(_run(kernel, q[start:end], k, v, 2, start))
            start = end
        assert torch.equal(torch.cat(pieces), whole), cuts


@pytest.mark.parametrize("H, G, D", [(9, 3, 64), (8, 2, 128), (16, 2, 64)])
def test_decode_rows_equal_their_rows_in_a_chunk(both, H, G, D):
    """attention_rows computes each one-token row with the chunk's arithmetic: the same bits as that token's row
    in a prefilled chunk, whatever rows and slots are batched beside it."""
    k, v = _store(G, D, seed=7)
    q = _queries(300, H, G, D)
    whole = _run(both.prefill_attention, q, k, v, 1, 0)
    picks = [0, 1, 63, 64, 65, 150, 299]
    rows = torch.empty((len(picks) + 1, H, D), dtype=torch.bfloat16)
    batch = torch.cat([q[picks], _queries(1, H, G, D)])                 # a last row of another slot beside them
    slots, positions = torch.tensor([1] * len(picks) + [2]), torch.tensor([*picks, 20])
    both.attention_rows(batch, k, v, slots, positions, D ** -0.5, rows)
    assert torch.equal(rows[:-1], whole[picks])


def test_the_two_kernels_agree_within_rounding():
    """The AMX tiles and the AVX512 registers sum in other orders: within bf16 rounding of each other."""
    vector, tiles = module("prefill_attention"), module("tile_attention")
    k, v = _store(3, 64, seed=5)
    q = _queries(200, 9, 3, 64)
    torch.testing.assert_close(_run(tiles.prefill_attention, q, k, v, 0, 40),
                               _run(vector.prefill_attention, q, k, v, 0, 40), atol=2e-2, rtol=2e-2)


def test_columns_past_the_chunk_are_never_read(kernel):
    k, v = _store(3, 64, seed=2)
    q = _queries(100, 9, 3, 64)
    clean = _run(kernel, q, k, v, 0, 30)
    k[0, :, 130:], v[0, :, 130:] = float("nan"), float("nan")          # the store's unwritten columns
    k[1:], v[1:] = float("nan"), float("nan")                          # other slots
    assert torch.equal(_run(kernel, q, k, v, 0, 30), clean)


def test_spans_out_of_the_store_are_refused(kernel):
    k, v = _store(3, 64, seed=3)
    q = _queries(10, 9, 3, 64)
    for slot, start in ((SLOTS, 0), (-1, 0), (0, CAPACITY - 9), (0, -1)):
        with pytest.raises(RuntimeError, match="out of range"):
            _run(kernel, q, k, v, slot, start)


async def test_a_bf16_smollm2_server_prefills_chunks_batched_as_alone(tmp_path):
    """Through a real server and the openai SDK: SmolLM2 in bf16 (head_dim 64) prefills its prompts through
    the kernel, in 48-token chunks beside other requests' decode rows, and greedy completions sent together
    equal the same completions sent one by one."""
    import asyncio

    import openai

    from tests.conftest import start_inprocess, write_repository

    # prefix caching off: the batched prompts are prefilled in chunks again, not found in the slots the ones sent
    # alone kept (that reuse has its own test: test_prefix_cache.py)
    root = write_repository(tmp_path, {"m": {"weights": "builtin:smollm2", "dtype": "bfloat16", "max_batch_size": 8,
                                             "max_step_tokens": 48, "response_cache": False, "prefix_cache_mb": 0}})
    server = start_inprocess(root)
    try:
        runner = server.engine.get("m").backend.runner
        if runner.forward_pass.kernels.prefill is None:
            pytest.skip("this CPU has no AVX512-BF16")
        async with openai.AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0) as client:
            async def complete(text: str) -> str:
                reply = await client.completions.create(model="m", prompt=text, max_tokens=8, temperature=0,
                                                        extra_body={"ignore_eos": True})
                return reply.choices[0].text

            prompts = [f"Item {i}: " + "the quick brown fox jumps over the lazy dog " * (1 + 4 * i) for i in range(5)]
            alone = [await complete(p) for p in prompts]
            assert await asyncio.gather(*[complete(p) for p in prompts]) == alone
    finally:
        server.stop()

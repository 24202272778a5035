"""The native decode-attention kernel (native/decode_attention.cpp): equal to SDPA over each row's own
columns, and a row's output is the same whatever else is in the batch."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from conch.engine.backends.conch import native

G, R, D, SLOTS, CAPACITY = 3, 3, 64, 10, 300


def _reference(q, k, v, slots, lengths) -> torch.Tensor:
    """float32 SDPA of each row alone over its slot's columns 0..length-1."""
    return torch.cat([F.scaled_dot_product_attention(q[i:i + 1].float(), k[s:s + 1, :, :n].float(),
                                                     v[s:s + 1, :, :n].float())
                      for i, (s, n) in enumerate(zip(slots.tolist(), lengths.tolist(), strict=True))])


def test_the_kernel_builds_here():
    assert native.load("decode_attention") is not None      # a C++ compiler and ninja come with the repo's setup


def test_decode_attention_equals_sdpa_per_row_and_ignores_the_batch():
    kernel = native.load("decode_attention").decode_attention
    gen = torch.Generator().manual_seed(0)
    k, v = (torch.randn(SLOTS, G, CAPACITY, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    q = torch.randn(6, G, R, D, generator=gen).to(torch.bfloat16)
    slots = torch.tensor([7, 0, 3, 9, 4, 1])
    lengths = torch.tensor([1, 300, 17, 256, 129, 64])
    out = kernel(q, k, v, slots, lengths, D ** -0.5)
    assert out.shape == q.shape and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), _reference(q, k, v, slots, lengths), atol=2e-2, rtol=2e-2)
    for i in range(len(slots)):                          # alone, bit for bit what it was in the batch
        alone = kernel(q[i:i + 1].contiguous(), k, v, slots[i:i + 1], lengths[i:i + 1], D ** -0.5)
        assert torch.equal(alone[0], out[i])


def test_rows_out_of_the_store_are_refused():
    kernel = native.load("decode_attention").decode_attention
    k = torch.zeros(2, G, 8, D, dtype=torch.bfloat16)
    q = torch.zeros(1, G, R, D, dtype=torch.bfloat16)
    for slot, length in ((2, 1), (0, 9), (0, 0)):
        try:
            kernel(q, k, k, torch.tensor([slot]), torch.tensor([length]), 1.0)
        except RuntimeError as exc:
            assert "out of range" in str(exc)
        else:
            raise AssertionError(f"slot {slot}, length {length} was accepted")


async def test_a_bf16_server_decodes_batched_requests_as_it_does_each_alone(tmp_path):
    """Through a real server and the openai SDK: a bf16 model's decode rows run the kernel, and greedy
    completions sent together equal the same completions sent one by one."""
    import asyncio

    import openai

    from tests.conftest import start_server, write_repository

    root = write_repository(tmp_path, {"tiny": {"weights": "builtin:tiny", "dtype": "bfloat16",
                                                "max_batch_size": 8}})
    server = start_server(["--model-repository", str(root)], root)
    try:
        async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="none") as client:
            async def complete(prompt: str) -> str:
                reply = await client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0,
                                                        extra_body={"ignore_eos": True})
                return reply.choices[0].text

            prompts = [f"{word} " * (3 + 4 * i) for i, word in enumerate(["sea", "robot", "key", "moon", "city"])]
            alone = [await complete(p) for p in prompts]
            assert await asyncio.gather(*[complete(p) for p in prompts]) == alone
    finally:
        server.stop()

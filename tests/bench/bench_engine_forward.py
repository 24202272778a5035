"""One forward step, Conch's flattened Llama runner vs the HF forward with a DynamicCache, in alternating
rounds in one process (SmolLM2-135M bf16, 2 threads): decode at batch 1, 16, 64 over 200-token contexts,
and a 1,500-token prefill. Prints each median time and the median HF / flat ratio (> 1: flat is faster)."""
from __future__ import annotations

import statistics
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from conch.engine.backends.conch.kv.slot_store import SlotKVStore, StorePolicy
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.model.step import Span, Step
from conch.engine.weights import ensure_smollm2

CONTEXT, ROUNDS = 200, 4


class _Cell:
    computed = 0        # a slot's occupant (a Sequence, in the runner)


def _decode_step(spans: list[tuple[int, int]]) -> Step:
    """spans: (slot, position) of one new token each."""
    n = len(spans)
    return Step(torch.full((n,), 5), torch.tensor([p for _, p in spans]), torch.tensor([s for s, _ in spans]),
                tuple(Span(s, p, i, 1) for i, (s, p) in enumerate(spans)), torch.arange(n))


def _rounds(flat, hf) -> str:
    flat()
    hf()
    tf, th = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        flat()
        tf.append(time.perf_counter() - start)
        start = time.perf_counter()
        hf()
        th.append(time.perf_counter() - start)
    ratio = statistics.median(h / f for h, f in zip(th, tf, strict=True))
    return f"flat {statistics.median(tf) * 1000:.0f} ms  hf {statistics.median(th) * 1000:.0f} ms  hf/flat {ratio:.2f}x"


def _decode(model, forward: LlamaForward, batch: int) -> str:
    c = model.config
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.bfloat16, 2**33, 64,
                     StorePolicy.RESERVED, forward.kernels.blocked)
    slots = [kv.admit(_Cell(), CONTEXT + 2 * ROUNDS + 8) for _ in range(batch)]
    cache = DynamicCache(config=c)
    model(input_ids=torch.randint(0, 40000, (batch, CONTEXT)), cache=cache, use_cache=True, logits_to_keep=1)
    position = [CONTEXT]

    def flat() -> None:
        forward(_decode_step([(s, position[0]) for s in slots]), kv)
        position[0] += 1

    def hf() -> None:
        model(input_ids=torch.ones(batch, 1, dtype=torch.long), cache=cache, use_cache=True, logits_to_keep=1)

    return _rounds(flat, hf)


@torch.inference_mode()
def main() -> None:
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(ensure_smollm2(), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").eval()
    forward, c = LlamaForward(model), model.config
    for batch in (1, 16, 64):
        print(f"decode batch {batch:2}: {_decode(model, forward, batch)}", flush=True)
    ids = torch.randint(0, 40000, (1500,))
    kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.bfloat16, 2**33, 1,
                     StorePolicy.RESERVED, forward.kernels.blocked)

    def prefill_flat() -> None:
        slot = kv.admit(_Cell(), 1500)
        assert slot is not None
        forward(Step(ids, torch.arange(1500), torch.full((1500,), slot), (Span(slot, 0, 0, 1500),),
                     torch.tensor([1499])), kv)
        kv.release(slot)

    print(f"prefill 1500: {_rounds(prefill_flat, lambda: model(input_ids=ids[None], logits_to_keep=1))}", flush=True)

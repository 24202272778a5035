"""What batch invariance costs: one forward step of Conch's flattened Llama runner with `batch_invariant` on
and off, in alternating rounds in one process (SmolLM2-135M bf16): decode at batch 1, 16, 64 over 200- and
1,000-token contexts, and a 1,500-token prefill. Prints each median step time, decode tokens/s and the median
off / on time ratio (< 1: invariance costs that fraction).

CONCH_BENCH_THREADS (default 2): on a machine shared past its cores use 1, since OpenMP's barriers then wait
out other processes' time slices and a 2-thread step takes 10-100x its quiet time."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch
from transformers import AutoModelForCausalLM

from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.backends.conch.kv.slot_store import SlotKVStore, StorePolicy
from conch.engine.backends.conch.model.step import Span, Step
from conch.engine.weights import ensure_smollm2

ROUNDS = 6


class _Cell:
    computed = 0        # a slot's occupant (a Sequence, in the runner)


def _store(model, forward: LlamaForward, slots: int) -> SlotKVStore:
    c = model.config
    return SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, forward.head_dim, torch.bfloat16, 2**33, slots,
                       StorePolicy.RESERVED, forward.kernels.blocked)


def _prefill(forward: LlamaForward, kv: SlotKVStore, slot: int, ids: torch.Tensor) -> None:
    n = len(ids)
    forward(Step(ids, torch.arange(n), torch.full((n,), slot), (Span(slot, 0, 0, n),), torch.tensor([n - 1])), kv)


def _decoder(model, forward: LlamaForward, batch: int, context: int) -> Callable[[], None]:
    """A step of `batch` decode rows, each over its own `context`-token slot (one new position per call)."""
    kv = _store(model, forward, batch)
    slots = [kv.admit(_Cell(), context + 4 * ROUNDS) for _ in range(batch)]
    for s in slots:
        _prefill(forward, kv, s, torch.randint(0, 40000, (context,)))
    position = [context]

    def step() -> None:
        p = position[0]
        forward(Step(torch.full((batch,), 5), torch.full((batch,), p), torch.tensor(slots),
                     tuple(Span(s, p, i, 1) for i, s in enumerate(slots)), torch.arange(batch)), kv)
        position[0] += 1
    return step


def _prefiller(model, forward: LlamaForward, n: int) -> Callable[[], None]:
    kv = _store(model, forward, 1)
    ids = torch.randint(0, 40000, (n,))

    def step() -> None:
        slot = kv.admit(_Cell(), n)
        assert slot is not None
        _prefill(forward, kv, slot, ids)
        kv.release(slot)
    return step


def _rounds(on: Callable[[], None], off: Callable[[], None]) -> tuple[float, float, float]:
    """Median seconds on, off, and the median off / on ratio over alternating rounds."""
    on(), off()
    t_on, t_off = [], []
    for _ in range(ROUNDS):
        for fn, times in ((on, t_on), (off, t_off)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    ratio = statistics.median(b / a for a, b in zip(t_on, t_off, strict=True))
    return statistics.median(t_on), statistics.median(t_off), ratio


@torch.inference_mode()
def main() -> None:
    torch.set_num_threads(int(os.environ.get("CONCH_BENCH_THREADS", "2")))
    model = AutoModelForCausalLM.from_pretrained(ensure_smollm2(), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").eval()
    on, off = LlamaForward(model, batch_invariant=True), LlamaForward(model, batch_invariant=False)
    for context in (200, 1000):
        for batch in (1, 16, 64):
            a, b, ratio = _rounds(_decoder(model, on, batch, context), _decoder(model, off, batch, context))
            print(f"decode batch {batch:2} context {context:4}: invariant {a * 1000:.1f} ms ({batch / a:.0f} tok/s)  "
                  f"plain {b * 1000:.1f} ms ({batch / b:.0f} tok/s)  plain/invariant {ratio:.2f}", flush=True)
    a, b, ratio = _rounds(_prefiller(model, on, 1500), _prefiller(model, off, 1500))
    print(f"prefill 1500: invariant {a * 1000:.0f} ms  plain {b * 1000:.0f} ms  plain/invariant {ratio:.2f}")


if __name__ == "__main__":
    main()

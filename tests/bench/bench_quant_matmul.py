"""The GGUF int8 product alone (native/quant_matmul.cpp), each product path it has here, against the memory
bandwidth floor: 30 random matrices of 8,192 x 2,048 in one ggml type (~290 MB of blocks for Q4_K, so none stays
in cache), packed as a load packs them, multiplied one after another by M rows of bf16 activations on 2 threads;
the best of 3 passes.

  vnni          each panel's groups decoded in registers, 8 rows of x at a time (quant_stream.h)
  amx           tiles of 16 rows over a panel decoded into memory, where the CPU has AMX-INT8 (VNNI for the
                rest); CONCH_BENCH_QUANT_PATHS=amx,vnni measures both
  floor         the blocks' bytes / a plain read's bandwidth (torch summing 2 GiB on 2 threads)

`python -m tests.bench bench_quant_matmul`; CONCH_BENCH_QUANT_TYPES (default Q4_K,Q8_0,Q6_K), CONCH_BENCH_QUANT_ROWS
(default 1,2,16,64). Figures printed with the CPU's flags, no asserts."""
from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.quantized import QUANT_TYPES
from tests.bench.bench_gguf import bandwidth, cpu_flags
from tests.gguf_files import random_blocks

SHAPE = (8192, 2048)
MATRICES = 30


def _best(fn: Callable[[], object], tries: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _products(kernel, x: torch.Tensor, blocks: list[torch.Tensor], qtype: str, path: str) -> float:
    """Seconds for x times every matrix in `blocks`, the best of 3."""
    return _best(lambda: [kernel.matmul_path(x, b, QUANT_TYPES[qtype], SHAPE[1], SHAPE[0], path) for b in blocks])


def main() -> None:
    torch.set_num_threads(2)
    kernel = native.load("quant_matmul")
    if kernel is None:
        print("bench_quant_matmul: no C++ compiler here; left out")
        return
    paths = [p for p in os.environ.get("CONCH_BENCH_QUANT_PATHS", "amx,vnni").split(",")
             if p == "vnni" and kernel.int8_available() or p == "amx" and kernel.amx_available()]
    bw = bandwidth()
    print(f"CPU flags: {cpu_flags()}; plain read {bw / 1e9:.1f} GB/s; {MATRICES} matrices of {SHAPE[0]} x {SHAPE[1]}")
    for qtype in os.environ.get("CONCH_BENCH_QUANT_TYPES", "Q4_K,Q8_0,Q6_K").split(","):
        one = torch.from_numpy(random_blocks(qtype, *SHAPE, scale=0.01, rng=np.random.default_rng(0)))
        blocks = [kernel.pack(one, QUANT_TYPES[qtype], SHAPE[1]) for _ in range(MATRICES)]
        size = sum(b.numel() for b in blocks)
        for rows in map(int, os.environ.get("CONCH_BENCH_QUANT_ROWS", "1,2,16,64").split(",")):
            x = torch.randn(rows, SHAPE[1]).bfloat16()
            for path in paths:
                took = _products(kernel, x, blocks, qtype, path)
                print(f"{qtype} rows {rows:3} {path:5} {took * 1e3:7.1f} ms  {size / took / 1e9:5.1f} GB/s of blocks  "
                      f"floor {size / bw * 1e3:5.1f} ms", flush=True)


if __name__ == "__main__":
    main()

"""Two builds of the quantized product kernel (native/quant_matmul.cpp and its headers) in one process: this
checkout's, and another revision's (CONCH_AB_REV, a git revision: its native/*.cpp and *.h extracted and built
under another name). One GGUF model is built with each build (gguf_layers.build_quantized: the same file, its
matrices packed by that build, in huge pages as a serving engine's), then decode steps of the two models
alternate (which goes first alternates too), CONCH_AB_PAIRS pairs (default 30) at each batch size of
CONCH_AB_BATCHES (default 1,16), 200-token contexts, 2 threads.

Why alternate: the host's memory bandwidth here moves by half from one minute to the next, so two builds timed
one after the other differ by more than most kernel changes do; within a pair both see the same minute. Prints
each build's median step and the median of the pairs' ratios (other / this: > 1, this checkout is faster) with
their quartiles. The two builds' bits may differ (a change of the arithmetic): timing only.

CONCH_AB_GGUF: the file (default: bench_gguf's Llama-3.2-1B Q4_K_M, built by `make bench-gguf`). Not part of
`make test`; `python -m tests.bench bench_native_ab`."""
from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.kv import huge_pages
from conch.engine.backends.conch.kv.slot_store import SlotKVStore, StorePolicy
from conch.engine.backends.conch.model.gguf_layers import build_quantized
from conch.engine.backends.conch.model.llama import LlamaForward
from conch.engine.weights.gguf_file import read_gguf
from tests.bench.bench_engine_forward import _Cell, _decode_step
from tests.bench.bench_gguf import CACHE

ROOT = Path(__file__).resolve().parents[2]
NATIVE = Path(native.__file__).resolve().parent
CONTEXT = 200


def other_build(rev: str) -> Any:
    """quant_matmul as revision `rev` has it, compiled under a name of its own (the same flags as native.load)."""
    from torch.utils import cpp_extension

    folder = Path(tempfile.mkdtemp(prefix=f"conch-ab-{rev[:12]}-"))
    listed = subprocess.run(["git", "ls-tree", "--name-only", rev, f"{NATIVE.relative_to(ROOT)}/"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout.split()
    for path in (p for p in listed if p.endswith((".cpp", ".h"))):
        blob = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True).stdout
        (folder / Path(path).name).write_bytes(blob)
    name = "conch_ab_quant_matmul_" + subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=ROOT, check=True,
                                                     capture_output=True, text=True).stdout.strip()
    return cpp_extension.load(name=name, sources=[str(folder / "quant_matmul.cpp")], extra_cflags=native.FLAGS,
                              extra_ldflags=["-fopenmp"], build_directory=str(folder))


class Decoder:
    """A model's decode steps at one batch size: `batch` sequences at CONTEXT tokens, one token each a step."""

    def __init__(self, model: Any, batch: int, steps: int) -> None:
        self.forward, c = LlamaForward(model), model.config
        self.kv = SlotKVStore(c.num_hidden_layers, c.num_key_value_heads, self.forward.head_dim, torch.bfloat16,
                              2**32, batch, StorePolicy.RESERVED, self.forward.kernels.blocked)
        self.slots = [self.kv.admit(_Cell(), CONTEXT + steps + 8) for _ in range(batch)]
        self.position = CONTEXT

    def step(self) -> float:
        start = time.perf_counter()
        self.forward(_decode_step([(s, self.position) for s in self.slots]), self.kv)
        self.position += 1
        return time.perf_counter() - start


def compare(models: dict[str, Any], batch: int, pairs: int) -> str:
    decoders = {name: Decoder(m, batch, pairs + 2) for name, m in models.items()}
    for d in decoders.values():
        d.step()
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for i in range(pairs):                  # which goes first alternates: an A/A run read 0.92 with one order
        for name in (list(decoders) if i % 2 == 0 else list(reversed(decoders))):
            times[name].append(decoders[name].step())
    ratios = sorted(o / t for t, o in zip(times["this"], times["other"], strict=True))
    return (f"batch {batch:3}: this {statistics.median(times['this']) * 1e3:6.1f} ms, other "
            f"{statistics.median(times['other']) * 1e3:6.1f} ms, other / this {statistics.median(ratios):.3f} "
            f"(quartiles {ratios[len(ratios) // 4]:.3f}-{ratios[3 * len(ratios) // 4]:.3f}, {pairs} pairs)")


@torch.inference_mode()
def main() -> None:
    torch.set_num_threads(2)
    rev = os.environ.get("CONCH_AB_REV", "HEAD~1")
    path = Path(os.environ.get("CONCH_AB_GGUF", CACHE / "llama-3.2-1b-random-q4_k_m.gguf")).expanduser()
    if not path.exists():
        print(f"{path} is missing: `make bench-gguf` builds it, or set CONCH_AB_GGUF", flush=True)
        return
    builds = {"this": native.load("quant_matmul"), "other": other_build(rev)}
    models = {name: build_quantized(read_gguf(path), torch.bfloat16, kernel) for name, kernel in builds.items()}
    while huge_pages.collapse_some():       # both models' weights in huge pages, as a serving engine's are
        pass
    print(f"{path.name}: this checkout's quant_matmul against {rev}'s", flush=True)
    for batch in (int(b) for b in os.environ.get("CONCH_AB_BATCHES", "1,16").split(",")):
        print(compare(models, batch, int(os.environ.get("CONCH_AB_PAIRS", "30"))), flush=True)


if __name__ == "__main__":
    main()

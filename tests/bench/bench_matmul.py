"""The layers' matmul per kernel path (matmul_path.py) against oneDNN's packed linear, on SmolLM2-135M's real
layer shapes (its config: q/k/v fused, o, gate/up fused, down), at 1 to 2,048 rows, in one process: each round
times every path once per (shape, rows), and a path's figure is its fastest call over the rounds / oneDNN's
fastest (< 1: faster than oneDNN; on a loaded machine the fastest call is the one least disturbed). Prints the
CPU's flags first.

The AVX512-BF16 path is also set against oneDNN held to AVX512-BF16 (`ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16`, a
second process): what oneDNN does on a CPU without AMX.

CONCH_BENCH_THREADS (default 2; on a machine shared past its cores use 1: OpenMP's barriers then wait out other
processes' time slices), CONCH_BENCH_ROUNDS (default 5), CONCH_BENCH_TORCH=0 leaves aten's path out."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from conch.engine.backends.conch.model.matmul_path import KERNELS, cpu_flags
from conch.engine.backends.conch.native import load
from conch.engine.weights import ensure_smollm2

ROWS = (1, 16, 64, 256, 1024, 2048)
ISA = "AVX512_CORE_BF16"


def shapes() -> list[tuple[str, int, int]]:
    """(name, out, in) of each layer matrix of the default model, from its config."""
    c = json.loads((ensure_smollm2() / "config.json").read_text())
    h, i, d = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    qkv = (c["num_attention_heads"] + 2 * c["num_key_value_heads"]) * d
    return [("qkv", qkv, h), ("o", h, h), ("gate_up", 2 * i, h), ("down", h, i)]


def products(w: torch.Tensor, paths: tuple[str, ...]) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 64)
    out: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "onednn": lambda x: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")}
    if os.environ.get("CONCH_BENCH_TORCH", "1") != "0":
        out["torch"] = lambda x: torch.nn.functional.linear(x, w)
    for path in paths:
        kernel = load(KERNELS[path])
        if kernel is not None and kernel.available() and kernel.fits(*w.shape):
            p = kernel.pack(w)
            out[path] = lambda x, k=kernel, p=p: k.matmul(x, p)
    return out


def _time(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    """The fastest of a few calls: other processes' load only ever adds time."""
    f(x)
    times = []
    for _ in range(max(3, min(50, 2048 // x.shape[0]))):
        start = time.perf_counter()
        f(x)
        times.append(time.perf_counter() - start)
    return min(times)


def measure(paths: tuple[str, ...], rounds: int) -> dict[str, dict[tuple[str, int], tuple[float, float]]]:
    """{path: {(shape, rows): (fastest us, that / oneDNN's fastest)}}, the paths interleaved in each round."""
    gen = torch.Generator().manual_seed(0)
    best: dict[str, dict[tuple[str, int], float]] = {}
    for name, out, inner in shapes():
        fs = products((torch.randn(out, inner, generator=gen) * 0.05).bfloat16(), paths)
        for rows in ROWS:
            x = torch.randn(rows, inner, generator=gen).bfloat16()
            for _ in range(rounds):
                for path, f in fs.items():
                    cell = best.setdefault(path, {})
                    cell[(name, rows)] = min(cell.get((name, rows), math.inf), _time(f, x))
    return {p: {k: (t * 1e6, t / best["onednn"][k]) for k, t in d.items()} for p, d in best.items()}


def report(title: str, figures: dict[str, dict[tuple[str, int], tuple[float, float]]]) -> None:
    print(f"\n{title}\n(fastest time / oneDNN's fastest, over rounds; < 1.00 is faster; oneDNN's row: its own us)")
    names = [n for n, _, _ in shapes()]
    print(f"{'path':8} {'shape':8} " + " ".join(f"{r:>13}" for r in ROWS))
    for path, d in figures.items():
        for name in names:
            cells = []
            for r in ROWS:
                us, ratio = d[(name, r)]
                cells.append(f"{us:8.0f}us" if path == "onednn" else f"{ratio:13.2f}")
            print(f"{path:8} {name:8} " + " ".join(f"{c:>13}" for c in cells))


def main() -> None:
    torch.set_num_threads(int(os.environ.get("CONCH_BENCH_THREADS", "2")))
    rounds = int(os.environ.get("CONCH_BENCH_ROUNDS", "5"))
    if os.environ.get("ONEDNN_MAX_CPU_ISA") == ISA:                # the child: oneDNN as on a CPU without AMX
        json.dump({p: {f"{n}:{r}": v for (n, r), v in d.items()} for p, d in measure(("avx512",), rounds).items()},
                  sys.stdout)
        return
    print("cpu flags:", " ".join(cpu_flags()), f"| threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}")
    report("all paths vs oneDNN (its best ISA here)", measure(("amx", "avx512"), rounds))
    child = subprocess.run([sys.executable, "-m", "tests.bench.bench_matmul"], capture_output=True, text=True,
                           check=True, env={**os.environ, "ONEDNN_MAX_CPU_ISA": ISA})
    figures = {p: {(k.split(":")[0], int(k.split(":")[1])): tuple(v) for k, v in d.items()}
               for p, d in json.loads(child.stdout).items() if p in ("onednn", "avx512")}
    report(f"the AVX512-BF16 path vs oneDNN held to {ISA}", figures)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

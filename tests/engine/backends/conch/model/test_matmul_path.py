"""The kernel path of the layers' matmuls (matmul_path.py): CONCH_MATMUL_PATH forces each path this CPU runs and
refuses one it cannot run or does not know, by name; and on each native path a row's bits are the same at every
row count from 1 to 2,048, wherever the row sits (weights.py's products, as the forward calls them)."""
from __future__ import annotations

import pytest
import torch

from conch.engine.backends.conch.model import matmul_path
from conch.engine.backends.conch.kv.huge_pages import HugePageArena
from conch.engine.backends.conch.model.kernels import Kernels
from conch.engine.backends.conch.model.matmul_path import ENV, ORDER, choose
from conch.engine.backends.conch.model.weights import Narrow, NarrowPacking, product

ROWS = 2048


def _runs_here(name: str) -> bool:
    return matmul_path.find(name, torch.bfloat16) is not None


@pytest.fixture(params=ORDER)
def path(request, monkeypatch) -> str:
    """Each path forced; one this CPU or build cannot run is skipped (its refusal is tested below)."""
    if not _runs_here(request.param):
        pytest.skip(f"{request.param} does not run here (flags: {' '.join(matmul_path.cpu_flags())})")
    monkeypatch.setenv(ENV, request.param)
    return request.param


def test_the_switch_forces_the_path(path):
    chosen = choose(torch.bfloat16)
    assert chosen.name == path
    assert (chosen.kernel is not None) == (path in matmul_path.KERNELS)
    assert Kernels.load(torch.bfloat16, 64).matmul.name == path
    assert choose(torch.float32).name in ("onednn", "torch")             # the native paths serve bf16 only


def test_auto_takes_the_first_path_that_runs_here(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert choose(torch.bfloat16).name == next(n for n in ORDER if _runs_here(n))
    if "amx_bf16" in matmul_path.cpu_flags():
        assert choose(torch.bfloat16).name == "amx"


def test_an_unknown_or_unrunnable_path_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(ENV, "mkl")
    with pytest.raises(ValueError, match="CONCH_MATMUL_PATH='mkl'"):
        choose(torch.bfloat16)
    monkeypatch.setenv("CONCH_NATIVE_KERNELS", "0")                     # no native kernel: amx cannot run
    matmul_path.native.load.cache_clear()
    try:
        monkeypatch.setenv(ENV, "amx")
        with pytest.raises(ValueError, match="CONCH_MATMUL_PATH=amx: this CPU or build cannot run it"):
            choose(torch.bfloat16)
        monkeypatch.delenv(ENV)
        assert choose(torch.bfloat16).name == "onednn"                  # a CPU without AVX512 still serves
    finally:
        matmul_path.native.load.cache_clear()


COUNTS = sorted({*range(1, 70), *range(70, ROWS + 1, 37), *(2**i + d for i in range(7, 12) for d in (-1, 0, 1)), ROWS})


@pytest.mark.parametrize(("out", "inner"), [(64, 64), (128, 1088)])
def test_a_rows_bits_are_the_same_at_every_row_count(path, out, inner):
    """Rows of one x, 1 to 2,048 of them (every count to 69, then every 37th and each power of 2 +- 1: every
    residue of a 16- or 32-row tile) as one product, the first rows and the last rows, against the whole x."""
    if path not in matmul_path.KERNELS:
        pytest.skip("not a batch-invariant path (matmul_path.py: oneDNN's rows 33..63 take another order on AMX)")
    gen = torch.Generator().manual_seed(out + inner)
    w = (torch.randn(out, inner, generator=gen) * 0.05).bfloat16()
    x = torch.randn(ROWS, inner, generator=gen).bfloat16()
    chosen = choose(torch.bfloat16)
    f = product(w, None, chosen.pack, False, NarrowPacking(chosen.kernel, HugePageArena()))
    assert isinstance(f, Narrow)
    whole = f(x)
    for m in COUNTS:
        assert torch.equal(f(x[:m]), whole[:m]), m
        assert torch.equal(f(x[ROWS - m:]), whole[ROWS - m:]), m

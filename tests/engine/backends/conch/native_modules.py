"""The compiled native kernels (engine/backends/conch/native/) as the kernel tests load them."""
from __future__ import annotations

from typing import Any

import pytest

from conch.engine.backends.conch import native


def compiled(name: str, vector: bool = False) -> Any:
    """native/<name>.cpp's module: it must build (a C++ compiler and ninja come with the repo's setup). With
    `vector`, the test is skipped on a CPU without AVX512-BF16, where the module has no path to test."""
    module = native.load(name)
    assert module is not None
    if vector and not module.available():
        pytest.skip("this CPU has no AVX512-BF16")
    return module

"""Fixtures the own engine's tests share."""
from __future__ import annotations

import pytest

from conch.engine.backends.conch import native


@pytest.fixture(scope="module")
def quant_kernel():
    """native/quant_matmul, or the test skipped where it cannot be built."""
    module = native.load("quant_matmul")
    if module is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    return module

"""Loading a quantized GGUF builds the model from the file without a dequantized copy (gguf_layers.py): the
load's peak resident memory grows by about the file's size (its blocks, memory-mapped and read once, plus the
few tensors dequantized alone), where transformers' loader, which dequantizes every tensor first, grows by more
than the dequantized model. Measured in a fresh process each: ru_maxrss after the imports and the kernel's
load, then after the model's; a bound with margin, not a timing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conch.engine.backends.conch import native
from tests.gguf_files import small_llama, write_llama_gguf

MB = 2**20
# The peak's growth may exceed the file by this fraction plus the fixed margin (the norms and the embedding
# dequantized in bf16: ~1.6 MB here; allocator slack)
MARGIN, FIXED = 0.15, 8 * MB

MEASURE = """
import json, resource, sys, torch
from pathlib import Path
from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.gguf_layers import build_quantized
from conch.engine.weights.gguf_file import load_gguf_dequantized, read_gguf
kernel = native.load("quant_matmul")
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path, before = Path(sys.argv[1]), peak()
if sys.argv[2] == "conch":
    model = build_quantized(path, "llama", torch.bfloat16, kernel)
else:
    model = load_gguf_dequantized(read_gguf(path), torch.bfloat16)
print(json.dumps({"growth": peak() - before}))
"""


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory):
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    path = tmp_path_factory.mktemp("peak") / "m-q8_0.gguf"
    # ~37M parameters in matrices (40 MB as Q8_0, 74 MB in bf16), a small vocabulary so the matrices dominate
    return write_llama_gguf(small_llama(hidden=768, inter=3072, layers=4, vocab=1024), path, "Q8_0",
                            vocabulary=False)


def _growth(path, how: str) -> int:
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path), how], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
    return json.loads(out.strip().splitlines()[-1])["growth"]


def test_loading_a_quantized_file_grows_by_about_its_size(q8_file):
    size = q8_file.stat().st_size
    bound = size * (1 + MARGIN) + FIXED
    conch = _growth(q8_file, "conch")
    assert conch <= bound, (conch / MB, size / MB)
    dequantized = _growth(q8_file, "transformers")            # the measurement tells the two apart
    assert dequantized > bound, (dequantized / MB, size / MB)

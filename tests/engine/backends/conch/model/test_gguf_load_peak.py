"""Loading a quantized GGUF builds the model from the file without a dequantized copy (gguf_layers.py): the
load's peak resident memory grows by about the file's size (its blocks, memory-mapped and read once, plus the
few tensors dequantized alone), where transformers' loader, which dequantizes every tensor first, grows by more
than the dequantized model. Measured in a fresh process each (Linux): the peak resident size (VmHWM, reset
through /proc/self/clear_refs after the imports and the kernel's load) less the resident size then; a bound
with margin, not a timing."""
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
import json, sys, torch
from pathlib import Path
from conch.engine.backends.conch import native
from conch.engine.backends.conch.model.gguf_layers import build_quantized
from conch.engine.weights.gguf_file import load_gguf_dequantized, read_gguf
kernel = native.load("quant_matmul")
def status(key):
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024
def load(path):
    if sys.argv[3] == "conch":
        return build_quantized(read_gguf(path), torch.bfloat16, kernel)
    return load_gguf_dequantized(read_gguf(path), torch.bfloat16)
load(Path(sys.argv[2]))                           # a tiny file first: the lazy imports are done, not measured
with open("/proc/self/clear_refs", "w") as f:     # the peak (VmHWM) restarts from the resident size now
    f.write("5")
before = status("VmRSS")
model = load(Path(sys.argv[1]))
print(json.dumps({"growth": status("VmHWM") - before}))
"""


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory):
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    root = tmp_path_factory.mktemp("peak")
    tiny = write_llama_gguf(small_llama(vocab=1024), root / "tiny.gguf", "Q8_0", vocabulary=False)
    # ~37M parameters in matrices (37 MB as Q8_0, 74 MB in bf16), a small vocabulary so the matrices dominate
    return tiny, write_llama_gguf(small_llama(hidden=768, inter=3072, layers=4, vocab=1024), root / "m-q8_0.gguf",
                                  "Q8_0", vocabulary=False)


def _growth(files, how: str) -> int:
    tiny, path = files
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(tiny), how], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
    return json.loads(out.strip().splitlines()[-1])["growth"]


def test_loading_a_quantized_file_grows_by_about_its_size(q8_file):
    size = q8_file[1].stat().st_size
    bound = size * (1 + MARGIN) + FIXED
    conch = _growth(q8_file, "conch")
    assert conch <= bound, (conch / MB, size / MB)
    dequantized = _growth(q8_file, "transformers")            # the measurement tells the two apart
    assert dequantized > bound, (dequantized / MB, size / MB)

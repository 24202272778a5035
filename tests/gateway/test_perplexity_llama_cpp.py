"""Conch's perplexity on a GGUF file beside llama.cpp's own `llama-perplexity` on the same file: the packaged
SmolLM2-135M-Instruct Q4_1, and Q8_0 / Q4_K_M files that llama-quantize makes from the setup's f16 GGUF of
the same model (its 576-wide rows are not a multiple of 256: llama-quantize gives some Q4_K_M tensors a
fallback type, which Conch serves as the file says, dequantizing types without a kernel at load).

Both score the same tokens of a fixed English text (tests/data/perplexity.txt): llama-perplexity's chunks of
N_CTX tokens (BOS first when the vocabulary adds one), each chunk's second half after its first token. Conch
is one real server (`conch serve --model NAME=FILE`, bf16: the int8 product of quant_matmul.cpp), and its
figure comes from prompt logprobs through the openai SDK (/v1/completions, echo, logprobs, max_tokens 0). The
tokens are the GGUF vocabulary's as transformers converts it, which agree with llama.cpp's on this text.

Needs `make llama-cpp` (skipped without it); slow (`make test-llama-cpp`)."""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import pytest
from openai import OpenAI

from conch.engine.backends.conch import native
from conch.engine.weights.smollm2 import gguf_path
from tests.conftest import start_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CPP = ROOT / ".llama-cpp"
TEXT = ROOT / "tests" / "data" / "perplexity.txt"
N_CTX, CHUNKS = 160, 3
WITHIN = 0.01
QUANTIZED = ("Q8_0", "Q4_K_M")


def _tool(name: str) -> Path:
    path = LLAMA_CPP / "bin" / name
    if not path.exists():
        pytest.skip(f"{path} is missing: run `make llama-cpp`")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    if native.load("quant_matmul") is None:
        pytest.skip("no C++ compiler: the quantized kernels cannot be built here")
    quantize, root = _tool("llama-quantize"), tmp_path_factory.mktemp("llama-ppl")
    f16 = LLAMA_CPP / "models" / "smollm2-135m-instruct-f16.gguf"
    made = {"Q4_1": gguf_path()}
    for qtype in QUANTIZED:
        made[qtype] = root / f"smollm2-{qtype}.gguf"
        subprocess.run([str(quantize), str(f16), str(made[qtype]), qtype, "2"], check=True, capture_output=True)
    return made


def llama_perplexity(path: Path) -> float:
    """llama-perplexity's figure. --no-repack: this build's repacked (AMX) Q4_1 product crashes on SmolLM2's
    576-wide rows (SIGSEGV; the f16 file runs either way, and repacking changes no figure there by > 0.02%)."""
    command = [str(_tool("llama-perplexity")), "-m", str(path), "-f", str(TEXT), "-c", str(N_CTX), "-b", str(N_CTX),
               "--chunks", str(CHUNKS), "-t", "2", "--no-repack"]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Final estimate: PPL = ([0-9.]+)", run.stdout + run.stderr)
    assert found, run.stderr[-2000:]
    return float(found.group(1))


def _tokens(path: Path) -> tuple[list[int], int | None]:
    """The text's tokens as llama-perplexity takes them (BOS first when the vocabulary adds one), and that BOS
    (None when it adds none)."""
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    fields = GGUFReader(path).fields
    adds_bos = "tokenizer.ggml.add_bos_token" in fields and bool(fields["tokenizer.ggml.add_bos_token"].contents())
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ids = tokenizer(TEXT.read_text(), add_special_tokens=False)["input_ids"]
    return ([tokenizer.bos_token_id, *ids], tokenizer.bos_token_id) if adds_bos else (ids, None)


def conch_perplexity(client: OpenAI, model: str, tokens: list[int], bos: int | None) -> float:
    """llama-perplexity's chunks: N_CTX tokens each (the first one BOS when `bos`), scored over the tokens
    after the chunk's first half."""
    first, logprobs = N_CTX // 2, []
    for i in range(CHUNKS):
        chunk = tokens[i * N_CTX:(i + 1) * N_CTX]
        chunk = [bos, *chunk[1:]] if bos is not None else chunk
        reply = client.completions.create(model=model, prompt=chunk, max_tokens=0, echo=True, logprobs=0)
        logprobs += reply.choices[0].logprobs.token_logprobs[first + 1:]
    assert len(logprobs) == CHUNKS * (N_CTX - first - 1)
    return math.exp(-sum(logprobs) / len(logprobs))


@pytest.fixture(scope="module")
def server(files, tmp_path_factory):
    args = [a for name, path in files.items() for a in ("--model", f"{name.lower()}={path}")]
    server = start_server(args, tmp_path_factory.mktemp("llama-ppl-server"), timeout=600)
    yield server
    server.stop()


@pytest.mark.parametrize("qtype", ["Q4_1", *QUANTIZED])
def test_perplexity_is_llama_cpps_on_the_same_file(files, server, qtype):
    tokens, bos = _tokens(files[qtype])
    assert len(tokens) >= CHUNKS * N_CTX
    client = OpenAI(base_url=f"{server.url}/v1", api_key="none")
    ours, theirs = conch_perplexity(client, qtype.lower(), tokens, bos), llama_perplexity(files[qtype])
    print(f"{qtype}: Conch {ours:.4f}, llama-perplexity {theirs:.4f}, ratio {ours / theirs:.4f}")
    assert abs(ours / theirs - 1) <= WITHIN, (ours, theirs)

"""A model repository for the Triton-face tests: the tiny LLM, the example ensemble (its LLM swapped for
the tiny one), and a model in Triton's vLLM layout (whose backend is not installed)."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tests.conftest import Server, free_port, start_server, write_repository

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "model_repository"
VLLM_PBTXT = 'name: "vllm_model"\nbackend: "vllm"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n'


def build_repository(root: Path, example: bool = True, vllm: bool = True) -> Path:
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16}})
    if example:
        for name in ("preprocess", "postprocess", "assistant", "smollm2"):
            shutil.copytree(EXAMPLE / name, root / name)
        (root / "smollm2" / "config.yaml").write_text("weights: builtin:tiny\ndtype: float32\n")
    if vllm:
        (root / "vllm_model" / "1").mkdir(parents=True)
        (root / "vllm_model" / "config.pbtxt").write_text(VLLM_PBTXT)
        (root / "vllm_model" / "1" / "model.json").write_text(json.dumps({"model": "facebook/opt-125m"}))
    return root


def start_triton(root: Path, *args: str) -> Server:
    grpc_port = free_port()
    server = start_server(["--model-repository", str(root), "--grpc-port", str(grpc_port), *args], root)
    server.grpc_port = grpc_port
    return server


def eventually(check, timeout: float = 20.0) -> bool:
    """Whether `check()` comes true within `timeout` seconds (what poll-mode tests wait on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False

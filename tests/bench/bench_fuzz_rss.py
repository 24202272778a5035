"""Issue 29: the server's RSS under the security fuzz drill (tests/security/test_fuzz.py), with the default models.

`conch serve` with the built-in repository's two models (SmolLM2 and all-MiniLM-L6-v2, configured as
engine/repository/repository.py does) but a 64-token context for SmolLM2, as the fuzz test's tiny model has:
a fuzzed body that drops `max_tokens` then generates for seconds, not for minutes. Then hypothesis's mutated
bodies for every fuzz route, the model name swapped for the default one, on one keep-alive connection. RSS
(psutil, the server process) is read after one request, every second during the run (the peak), and after
it. Goal: after the run <= 1.2 GB. `FUZZ_EXAMPLES` (default 200 per route, as the fast fuzz test) sets the
run's length.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
from hypothesis import given

from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.weights.minilm import EMBEDDING_MODEL_ID
from tests.conftest import start_server, write_repository
from tests.security import test_fuzz

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
CONTEXT = 64


def _default_templates() -> dict[str, dict]:
    """The fuzz templates, with the tiny model's name replaced by the default model's."""
    text = json.dumps(test_fuzz.TEMPLATES).replace('"tiny"', json.dumps(DEFAULT_MODEL_ID))
    return {path.replace("/tiny/", f"/{DEFAULT_MODEL_ID}/"): body for path, body in json.loads(text).items()}


def _rss_gb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 1e9


def _fuzz(client: httpx.Client, path: str) -> None:
    @test_fuzz._fuzz(EXAMPLES)
    @given(body=test_fuzz.bodies(path))
    def run(body: bytes) -> None:
        test_fuzz.check(client, path, body)
    run()


def main() -> None:
    templates = _default_templates()
    test_fuzz.TEMPLATES.clear()
    test_fuzz.TEMPLATES.update(templates)
    log_dir = Path(tempfile.mkdtemp(prefix="fuzz-rss-"))
    write_repository(log_dir, {
        DEFAULT_MODEL_ID: {"weights": "builtin:smollm2", "context_length": CONTEXT},
        EMBEDDING_MODEL_ID: {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32",
                             "max_batch_size": 32, "dynamic_batching": {}, "response_cache": False}})
    server = start_server(["--model-repository", str(log_dir)], log_dir, timeout=900)  # kernels may compile first
    pid, peak, done = server.process.pid, [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            peak[0] = max(peak[0], _rss_gb(pid))

    try:
        with httpx.Client(base_url=server.url, timeout=600, limits=httpx.Limits(max_connections=1)) as client:
            client.post("/v1/completions", json={"model": DEFAULT_MODEL_ID, "prompt": "hi", "max_tokens": 2})
            start = _rss_gb(pid)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            began = time.perf_counter()
            for path in test_fuzz.TEMPLATES:
                _fuzz(client, path)
                print(f"{path}: {EXAMPLES} bodies, RSS {_rss_gb(pid):.2f} GB", flush=True)
            elapsed = time.perf_counter() - began
            done.set()
            time.sleep(2.0)
            after = _rss_gb(pid)
        print(f"RSS after one request {start:.2f} GB, peak {max(peak[0], after):.2f} GB, after the run "
              f"{after:.2f} GB ({len(test_fuzz.TEMPLATES)} routes x {EXAMPLES} bodies, {elapsed:.0f} s); "
              f"goal after <= 1.2 GB")
    finally:
        done.set()
        server.stop()


if __name__ == "__main__":
    main()

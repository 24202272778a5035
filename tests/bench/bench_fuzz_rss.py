"""Issues 29 and 43: the server's RSS after the fuzz and load drills, with the default models.

`conch serve` with the built-in repository's two models (SmolLM2 and all-MiniLM-L6-v2, configured as
engine/repository/repository.py does) but a 64-token context for SmolLM2, as the fuzz tests' tiny model has:
a fuzzed body that drops its token bound then generates for seconds, not for minutes. Then:

- the fuzz: hypothesis's bodies (tests/security/fuzzing.py) for every route of both fuzz tests (the older
  routes', tests/security/test_fuzz.py, and every face's, tests/security/test_fuzz_faces.py: Responses,
  Conversations, chat, completions, embeddings, Messages, count_tokens, /v2), the model names swapped for the
  default ones, each answer checked as its test checks it;
- the load: conversations holding large items until the record store's memory tier (its default bound,
  256 MB) is past full and evicts, and stored responses, whole and streamed, alone and on a conversation,
  `LOAD_WORKERS` at a time.

RSS (psutil, the server process) is read after one request, every second during the run (the peak), and
after it, with the record store's own bytes from /metrics. Goal: after the run <= 1.3 GB (issue 43).
`FUZZ_EXAMPLES` (default 50 a route), `RSS_LOAD` (default 1: the tier filled once over) and `RSS_RESPONSES`
(default 60 of each kind) set its length.
tests/security/test_rss_drill.py runs it under `make test-slow` and asserts the goal.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.weights.minilm import EMBEDDING_MODEL_ID
from conch.gateway.records.store import DEFAULT_MEMORY_MB
from tests.conftest import Server, start_server, write_repository
from tests.security import test_fuzz, test_fuzz_faces

GOAL_GB = 1.3
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
LOAD = float(os.environ.get("RSS_LOAD", "1"))
CONTEXT = 64
ITEM_BYTES = 32 * 1024                 # one conversation item's text
ITEMS = 16                             # items a conversation is created with (~0.5 MB a conversation)
RESPONSES = int(os.environ.get("RSS_RESPONSES", "60"))   # stored responses of each kind: whole, streamed, on a
                                                         # conversation
LOAD_WORKERS = 8


@dataclass(frozen=True)
class RssFigures:
    start_gb: float                    # after one request
    peak_gb: float
    after_gb: float                    # after the run, the server idle
    bodies: int                        # fuzzed bodies sent
    conversations: int
    responses: int
    record_bytes: float                # the record store's memory tier, from /metrics, after the run
    record_evictions: float
    seconds: float

    def line(self) -> str:
        return (f"RSS after one request {self.start_gb:.2f} GB, peak {self.peak_gb:.2f} GB, after the run "
                f"{self.after_gb:.2f} GB ({self.bodies} fuzzed bodies, {self.conversations} conversations of "
                f"{ITEMS} x {ITEM_BYTES // 1024} kB items, {self.responses} stored responses, {self.seconds:.0f} s; "
                f"record store {self.record_bytes / 1e6:.0f} MB held, {self.record_evictions:.0f} evicted); "
                f"goal after <= {GOAL_GB} GB")


def _default(value):
    """A fuzz template or route with the test models' names replaced by the default models'."""
    text = json.dumps(value).replace('"tiny"', json.dumps(DEFAULT_MODEL_ID)).replace(
        '"minilm"', json.dumps(EMBEDDING_MODEL_ID)).replace("/tiny/", f"/{DEFAULT_MODEL_ID}/")
    return json.loads(text)


def _defaults(fuzz):
    templates = {_default(path): _default(body) for path, body in fuzz.templates.items()}
    return dataclasses.replace(fuzz, templates=templates)


def start(root: Path) -> Server:
    write_repository(root, {
        DEFAULT_MODEL_ID: {"weights": "builtin:smollm2", "context_length": CONTEXT},
        EMBEDDING_MODEL_ID: {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32",
                             "max_batch_size": 32, "dynamic_batching": {}, "response_cache": False}})
    return start_server(["--model-repository", str(root)], root, timeout=900,    # kernels may compile first
                        fork=False)                 # its RSS: a process started as `conch serve` starts


def fuzz(client: httpx.Client, examples: int) -> int:
    """Both fuzz tests' routes, `examples` bodies each; the number of bodies sent."""
    older, faces = _defaults(test_fuzz.FUZZ), _defaults(test_fuzz_faces.FUZZ)
    conversation = client.post("/v1/conversations", json={}).json()["id"]
    for path in older.templates:
        test_fuzz.fuzz_route(client, path, examples, fuzz=older)
        print(f"{path}: {examples} bodies", flush=True)
    for path in faces.templates:
        test_fuzz_faces.fuzz_route(client, conversation, path, examples, fuzz=faces)
        print(f"{path}: {examples} bodies", flush=True)
    return examples * (len(older.templates) + len(faces.templates))


def load(client: httpx.Client, conversations: int) -> int:
    """`conversations` conversations of large items, then stored responses; the number of responses."""
    text = "x" * ITEM_BYTES
    items = [{"type": "message", "role": "user", "content": text}] * ITEMS
    for k in range(conversations):
        r = client.post("/v1/conversations", json={"items": items, "metadata": {"n": str(k)}})
        assert r.status_code == 200, r.text[:300]
    bodies = [{"model": DEFAULT_MODEL_ID, "input": f"Say {k}.", "max_output_tokens": 8, "stream": k % 2 == 1}
              for k in range(2 * RESPONSES)]
    small = [client.post("/v1/conversations", json={"items": [items[0] | {"content": "Hello."}]}).json()["id"]
             for _ in range(RESPONSES)]
    bodies += [{"model": DEFAULT_MODEL_ID, "input": "Hi.", "max_output_tokens": 8, "conversation": small[k]}
               for k in range(RESPONSES)]

    def respond(body: dict) -> None:
        with client.stream("POST", "/v1/responses", json=body) as r:
            r.read()
            assert r.status_code == 200, r.text[:300]

    with ThreadPoolExecutor(LOAD_WORKERS) as pool:
        list(pool.map(respond, bodies))
    return len(bodies)


def _metric(text: str, name: str) -> float:
    return sum(float(m) for m in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))


def drill(server: Server, examples: int = EXAMPLES, load_factor: float = LOAD) -> RssFigures:
    """The fuzz, then the load, on `server`; its RSS figures."""
    process, peak, done = psutil.Process(server.process.pid), [0.0], threading.Event()

    def rss() -> float:
        return process.memory_info().rss / 1e9

    def sample() -> None:
        while not done.wait(1.0):
            peak[0] = max(peak[0], rss())

    conversations = int(load_factor * DEFAULT_MEMORY_MB * 2 ** 20 / (ITEMS * ITEM_BYTES)) + 1
    with httpx.Client(base_url=server.url, timeout=600, limits=httpx.Limits(max_connections=LOAD_WORKERS)) as client:
        client.post("/v1/completions", json={"model": DEFAULT_MODEL_ID, "prompt": "hi", "max_tokens": 2})
        start_gb = rss()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.perf_counter()
        try:
            bodies = fuzz(client, examples)
            print(f"after the fuzz: RSS {rss():.2f} GB", flush=True)
            responses = load(client, conversations)
        finally:
            done.set()
        seconds = time.perf_counter() - began
        time.sleep(2.0)
        after = rss()
        metrics = client.get("/metrics").text
    return RssFigures(start_gb, max(peak[0], after), after, bodies, conversations, responses,
                      _metric(metrics, "conch_record_store_memory_bytes"),
                      _metric(metrics, "conch_record_store_evictions(?:_total)?"), seconds)


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="fuzz-rss-"))
    server = start(root)
    try:
        print(drill(server).line(), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

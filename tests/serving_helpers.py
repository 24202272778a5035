"""Helpers for the serving-layer tests (cache, admission, keys, limits, metrics): a real redis-server on a
free loopback port, a fake backend whose output is a pure function of the request, and a POST driven at the
ASGI level, whose client hangs up at a chosen moment."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.engine import Engine
from conch.engine.loaded_model import LoadedModel
from conch.engine.repository import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest, PositionLogprobs, RequestStatus, TokenLogprob, Usage
from tests.conftest import free_port


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen
    dir: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.process = _spawn(self.port, self.dir)

    @contextlib.contextmanager
    def stalled(self):
        """Redis takes connections and answers nothing (SIGSTOP) until the block ends."""
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)


def _spawn(port: int, dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(dir)],
                            stdout=(dir / "redis.log").open("a"), stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(port=port, socket_timeout=1)
    for _ in range(100):
        try:
            if client.ping():
                return proc
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"redis-server did not start:\n{(dir / 'redis.log').read_text()[-2000:]}")


def start_redis(dir: Path) -> RedisServer:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed: run `bash scripts/ensure-redis.sh` (make test does)")
    port = free_port()
    return RedisServer(port, _spawn(port, dir), dir)


class FakeTokenizer:
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [ord(c) for c in text]

    def __len__(self) -> int:
        return 0x110000


class FakeBackend:
    """Tokens derived from a hash of (prompt, params, choice): same request, same output. `gate`, when set,
    holds every generation until released (to fill queues); `calls` counts generations."""

    capabilities = Capabilities(logprobs=True, n=True, seed=True, text_output=True)

    def __init__(self, config: ModelConfig) -> None:
        self.config, self.tokenizer, self.context_length = config, FakeTokenizer(), 4096
        self.calls = 0
        self.seen: list[str] = []          # request ids, in the order they reached the backend
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def health(self) -> bool:
        return True

    def stats(self) -> BackendStats:
        return BackendStats()

    async def abort(self, request_id: str, index: int | None = None) -> None: ...

    async def generate(self, request: GenerationRequest):
        self.calls += 1
        self.seen.append(request.id)
        if self.gate is not None:
            await self.gate.wait()
        p = request.params
        for index in range(p.n):
            seed = hashlib.sha256(repr((request.prompt_token_ids, p, request.grammar, index)).encode()).digest()
            for i in range(p.max_tokens):
                token = seed[i % len(seed)]
                lp = (PositionLogprobs(TokenLogprob(token, chr(65 + token % 26), -0.5),
                                       (TokenLogprob(1, "b", -1.5),)),) if p.logprobs is not None else ()
                last = i == p.max_tokens - 1
                if last and self.fail:
                    yield GenerationDelta(request.id, index, status=RequestStatus.FINISHED_ERROR, error="boom")
                    break
                yield GenerationDelta(
                    request.id, index, (token,), chr(65 + token % 26), lp,
                    RequestStatus.FINISHED_LENGTH if last else RequestStatus.RUNNING,
                    Usage(len(request.prompt_token_ids), p.max_tokens) if last else None)
                await asyncio.sleep(0)


def fake_engine(cache=None, max_queue_size: int | None = None, **config) -> Engine:
    """An Engine serving model 'm' from a FakeBackend (reach it as engine.get('m').backend). `backend` names
    the one the config claims, e.g. "transformers" for Triton's LLM tensor contract on /v2."""
    engine = Engine(cache=cache, max_queue_size=max_queue_size)
    cfg = ModelConfig(**{"name": "m", "backend": "fake", **config})
    engine._models["m"] = {cfg.version: LoadedModel(cfg, FakeBackend(cfg))}
    return engine


def chat_engine(**config) -> Engine:
    """fake_engine, its tokenizer rendering a chat as its messages' contents joined (a face that needs a chat
    template: chat, Responses)."""
    engine = fake_engine(**config)
    tokenizer = engine.get("m").backend.tokenizer
    tokenizer.chat_template = "fake"
    tokenizer.apply_chat_template = lambda messages, **kw: "".join(str(m["content"]) for m in messages)
    return engine


async def asgi_post(app, path: str, body: dict, hang_up: asyncio.Event,
                    send: Callable[[dict], Awaitable[None]]) -> None:
    """One POST of `body` (JSON) straight to the ASGI `app`, its messages to `send`; the client disconnects once
    `hang_up` is set."""
    raw, sent = json.dumps(body).encode(), False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await hang_up.wait()
        return {"type": "http.disconnect"}

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())],
             "server": ("test", 80), "client": ("client", 1)}
    await app(scope, receive, send)

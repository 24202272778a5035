"""Shared fixtures: a real `conch serve` process on 127.0.0.1, Redis and the test MCP servers, each started
once per test module."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from conch.engine.weights import DEFAULT_MODEL_ID
from tests import server_fork
from tests.mcp_servers import McpProcess, start as start_mcp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def response_head(sock: socket.socket) -> bytes:
    """The next response's status line and headers read off a raw connection (b'' if the server closed it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data


@dataclass
class Server:
    url: str           # http://127.0.0.1:PORT
    process: Any       # subprocess.Popen, or server_fork.ForkedProcess (the same surface)
    grpc_port: int | None = None
    log: Path | None = None

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def write_repository(root: Path, models: dict[str, dict]) -> Path:
    """models: name -> config.yaml mapping. Each model gets a version folder 1/."""
    for name, config in models.items():
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        (root / name / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def start_server(args: list[str], log_dir: Path, timeout: float = 240.0, env: dict | None = None,
                 port: int | None = None, fork: bool = True) -> Server:
    """`conch serve ARGS` on loopback, ready; forked from the tests' zygote (server_fork.py) unless `env` or
    `fork` False (a figure of the process itself, its resident memory: a fresh interpreter)."""
    port = port or free_port()
    log = log_dir / f"server-{port}.log"
    argv = ["serve", "--host", "127.0.0.1", "--port", str(port), *args]
    if fork and server_fork.enabled(env):
        proc: Any = server_fork.start(argv, log)
    else:
        proc = subprocess.Popen([sys.executable, "-m", "conch.gateway.cli", *argv], stdout=log.open("w"),
                                stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    return wait_ready(proc, f"http://127.0.0.1:{port}", log, timeout)


def wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout: float, what: str = "server",
               poll: float = 0.1) -> Server:
    """The started server once its /health answers 200; its log's tail in the error if it exits or never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return Server(url, proc, log=log)
        except httpx.HTTPError:
            pass
        time.sleep(poll)
    proc.kill()
    raise RuntimeError(f"{what} did not become ready:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def smollm2_server(tmp_path_factory):
    """The default model in float32 (exact batching comparisons), served with its real chat template."""
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {DEFAULT_MODEL_ID: {"weights": "builtin:smollm2", "dtype": "float32",
                                               "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    """A tiny random-weights model: fast, and its output is noise (constrained decoding must still parse)."""
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


def _mcp(module: str, *args: str, **kw) -> Iterator[McpProcess]:
    server = start_mcp(module, *args, **kw)
    try:
        yield server
    finally:
        server.stop()


# The test MCP servers (tests/mcp_servers/), each started once per module that asks, on loopback.
@pytest.fixture(scope="module")
def tools_http() -> Iterator[McpProcess]:
    yield from _mcp("tools_server", "streamable-http")


@pytest.fixture(scope="module")
def tools_sse() -> Iterator[McpProcess]:
    yield from _mcp("tools_server", "sse", path="/sse")


@pytest.fixture(scope="module")
def hanging() -> Iterator[McpProcess]:
    yield from _mcp("hang_server")


@pytest.fixture(scope="module")
def failing() -> Iterator[McpProcess]:
    yield from _mcp("error_server")


@pytest.fixture(scope="module")
def rogue(tools_http: McpProcess) -> Iterator[McpProcess]:
    """Redirects to the tools server under another origin (`localhost` in place of 127.0.0.1)."""
    yield from _mcp("rogue_server", tools_http.url.replace("127.0.0.1", "localhost"), path="")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A real redis-server for the module (scripts/ensure-redis.sh installs it)."""
    from tests.serving_helpers import start_redis          # serving_helpers imports this module

    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@dataclass
class InProcessServer:
    """uvicorn serving the app in a thread of this process, so tests can look at the engine's state."""

    url: str
    engine: object
    server: object
    thread: object

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start_inprocess(root: Path, timeout: float = 240.0) -> InProcessServer:
    import threading

    import uvicorn

    from conch.engine.engine import Engine
    from conch.engine.repository import ModelRepository
    from conch.gateway.app import build_app
    from conch.gateway.state import KEEP_ALIVE_S

    engine = Engine(ModelRepository(root))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(engine), host="127.0.0.1", port=port, log_level="warning",
                                           timeout_keep_alive=KEEP_ALIVE_S))   # as `conch serve`
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not server.started:
        if not thread.is_alive():
            raise RuntimeError("in-process server failed to start")
        time.sleep(0.2)
    return InProcessServer(url, engine, server, thread)

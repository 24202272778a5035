"""Helpers for Conch on Ray (tests/gateway/ray, tests/bench/bench_ray.py): a real local Ray cluster
(`ray start --head --block`, dashboard off, a small object store) and `conch serve --ray --address` joining
it, so that a test can also reach the replicas' actors."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from tests.conftest import Server, free_port, start_server

ROOT = Path(__file__).resolve().parents[1]
# A throwaway test cluster: no usage stats, no token (every process of the test joins it without one), and
# workers at nice 0 (Ray's default, 15, starves them beside the machine's other load, as the direct server
# the benchmark compares with is not).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_worker_niceness": "0"}


@dataclass
class RayHead:
    address: str                  # 127.0.0.1:PORT, the GCS
    process: subprocess.Popen
    port: int | None = None       # Ray Serve's HTTP port, once a server has started on this head

    def stop(self) -> None:
        """The node's processes killed, the head's command and every descendant (GCS, raylet, the actors'
        workers, which start sessions of their own but stay its descendants): a throwaway cluster has nothing
        to drain, and `ray start --block` answers SIGTERM by waiting ~30 s on live Serve replicas."""
        try:
            procs = [psutil.Process(self.process.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=30)
        self.process.wait(30)


def start_ray_head(log_dir: Path, num_cpus: int = 8) -> RayHead:
    port = free_port()
    # the tests' own interpreter (a venv's `ray` script may be a link to another venv's, whose workers would
    # import that checkout)
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--node-ip-address",
           "127.0.0.1", "--port", str(port), "--num-cpus", str(num_cpus), "--include-dashboard", "false",
           "--disable-usage-stats",
           "--object-store-memory", str(100 * 1024 * 1024), "--ray-client-server-port", str(free_port())]
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}     # the workers import this checkout
    log = log_dir / "ray-head.log"
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    head = RayHead(f"127.0.0.1:{port}", proc)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        if "Ray runtime started" in log.read_text():
            return head
        time.sleep(0.5)
    head.stop()
    raise RuntimeError(f"ray did not start:\n{log.read_text()[-4000:]}")


def start_ray_server(head: RayHead, args: list[str], log_dir: Path) -> Server:
    """`conch serve --ray` on `head`; replicas take a fraction of a CPU so that a 2-core machine fits them.
    Every server on one head answers on the head's first port: Ray Serve's proxy keeps the port it started on."""
    head.port = head.port or free_port()
    return start_server(["--ray", "--address", head.address, "--ray-ingress-cpus", "0.5",
                         "--ray-model-cpus", "0.5", *args], log_dir, timeout=300, env=RAY_ENV, port=head.port)


def stop_ray_server(server: Server, graceful: bool = True) -> None:
    """SIGINT: the CLI deletes its application, leaving the cluster up (graceful: its replicas drain).
    Tests whose cluster goes next skip that wait: killing the CLI leaves the replicas to the head's stop."""
    if not graceful:
        server.process.kill()
        server.process.wait(30)
        return
    server.process.send_signal(2)
    try:
        server.process.wait(60)
    except subprocess.TimeoutExpired:
        server.process.kill()


@dataclass(frozen=True)
class Turn:
    """One turn of an agent session, as the client saw it."""

    session: int
    turn: int                     # 0 = the session's first request
    prompt_tokens: int
    cached_tokens: int            # usage.prompt_tokens_details.cached_tokens
    ttft_s: float                 # to the first content delta
    replica: str                  # the model replica that answered (x-conch-replica)


def _system_prompt(session: int, words: int) -> str:
    """A long instruction block of its own per session (no two sessions share more than its first words)."""
    rng = random.Random(session)
    vocab = ("tool", "file", "search", "plan", "step", "check", "repository", "answer", "review", "test", "write",
             "read", "careful", "agent", "result", "report", "change", "error", "fix", "run")
    return f"You are agent {session}. " + " ".join(rng.choice(vocab) for _ in range(words))


async def _session(http: httpx.AsyncClient, url: str, model: str, session: int, turns: int,
                   words: int) -> list[Turn]:
    messages = [{"role": "system", "content": _system_prompt(session, words)},
                {"role": "user", "content": f"Task {session}: look at the repository."}]
    out = []
    for turn in range(turns):
        body = {"model": model, "messages": messages, "max_tokens": 4, "stream": True, "temperature": 0,
                "stream_options": {"include_usage": True}}
        start, first, text, usage = time.perf_counter(), None, [], None
        async with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
            r.raise_for_status()
            replica = r.headers["x-conch-replica"]
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk["choices"]:
                    if choice["delta"].get("content"):
                        first = first or time.perf_counter()
                        text.append(choice["delta"]["content"])
        assert usage is not None
        out.append(Turn(session, turn, usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"],
                        (first or time.perf_counter()) - start, replica))
        messages += [{"role": "assistant", "content": "".join(text)},
                     {"role": "user", "content": f"Now step {turn + 2}."}]
    return out


async def agent_sessions(url: str, model: str, sessions: int = 16, turns: int = 4,
                         words: int = 800) -> list[Turn]:
    """`sessions` concurrent chat sessions of `turns` turns each (streamed, 4 new tokens a turn): each turn's
    prompt is the whole conversation so far, so a replica that served the previous turn holds most of it."""
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=sessions * 2)) as http:
        runs = await asyncio.gather(*(_session(http, url, model, s, turns, words) for s in range(sessions)))
    return [t for run in runs for t in run]


def cached_ratio(turns: list[Turn]) -> float:
    """cached_tokens / prompt_tokens over the sessions' later turns (their first turns have nothing to reuse)."""
    later = [t for t in turns if t.turn > 0]
    return sum(t.cached_tokens for t in later) / sum(t.prompt_tokens for t in later)

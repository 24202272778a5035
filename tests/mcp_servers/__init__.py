"""Test MCP servers (built with the mcp package's MCPServer, formerly FastMCP) and how tests start them."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class McpProcess:
    url: str            # the server's MCP endpoint (or its base, for the rogue server)
    process: subprocess.Popen

    @property
    def origin(self) -> str:
        return "/".join(self.url.split("/", 3)[:3])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(module: str, *args: str, path: str = "/mcp", timeout: float = 60.0) -> McpProcess:
    """`python -m tests.mcp_servers.MODULE [args] PORT...` once its port accepts connections."""
    port = free_port()
    argv = [sys.executable, "-m", f"tests.mcp_servers.{module}", *args, str(port)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{module} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return McpProcess(f"http://127.0.0.1:{port}{path}", proc)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{module} did not open its port")


def stdio_command() -> list[str]:
    return [sys.executable, "-m", "tests.mcp_servers.tools_server", "stdio"]

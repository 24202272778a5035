"""`conch serve`'s connection settings over a real server: an idle keep-alive connection outlives the 5 s after
which httpx (and so the OpenAI SDK) drops it from its pool, so the server never closes a connection a client may
be sending on (the race that surfaced as a rare `APIConnectionError` under load); `--keep-alive-timeout` sets it."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import response_head, start_server

CLIENT_POOL_EXPIRY_S = 5.0          # httpx.Limits' default keepalive_expiry


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("logs")
    default, short = start_server([], log_dir), start_server(["--keep-alive-timeout", "1"], log_dir)
    yield default, short
    default.stop()
    short.stop()


def _ready(sock: socket.socket, host: str) -> bytes:
    """One GET /v2/health/ready on `sock`; the response's head ('' once the server has closed the connection)."""
    try:
        sock.sendall(f"GET /v2/health/ready HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        return response_head(sock)
    except ConnectionError:
        return b""


def _idle_then_ask(server, idle_s: float) -> tuple[bytes, bytes]:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        first = _ready(sock, host)
        time.sleep(idle_s)
        return first, _ready(sock, host)


def test_an_idle_connection_outlives_a_client_pools_expiry(servers):
    first, second = _idle_then_ask(servers[0], CLIENT_POOL_EXPIRY_S + 0.5)
    assert first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200")


def test_keep_alive_timeout_closes_idle_connections_after_it(servers):
    first, second = _idle_then_ask(servers[1], 2.5)
    assert first.startswith(b"HTTP/1.1 200") and second == b""


def test_a_negative_keep_alive_timeout_is_refused():
    r = subprocess.run([sys.executable, "-m", "conch.gateway.cli", "serve", "--keep-alive-timeout", "-1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--keep-alive-timeout must be >= 0" in r.stderr

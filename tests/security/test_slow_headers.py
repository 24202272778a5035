"""Slowloris over a real server: a connection that sends part of its headers, or nothing, is closed once
--header-timeout passes; one that completes its headers in time is served as before, and kept alive."""
from __future__ import annotations

import socket

import pytest

from tests.conftest import response_head, start_server, write_repository


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    server = start_server(["--model-repository", str(root), "--header-timeout", "1"], root)
    yield server
    server.stop()


def _connect(server) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (a recv timeout of 30 s fails the test instead)."""
    return sock.recv(65536) == b""


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "])
def test_a_connection_that_never_finishes_its_headers_is_closed(server, sent):
    with _connect(server) as sock:
        sock.sendall(sent)
        assert _closed_by_server(sock)


def test_headers_in_time_are_served_and_the_connection_kept(server):
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"HTTP/1.1 200" in response_head(sock)

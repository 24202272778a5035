"""Request bodies are bounded before anything parses them, over a real server with keys: the key is checked
from the headers before the body is read (a refused caller's body is never awaited), a chunked body stops at
the 16 MB limit with 413, and JSON nested deeper than 64 levels is a 400 on /v1 and /v2 that leaves the
keep-alive connection usable."""
from __future__ import annotations

import json
import socket

import httpx
import pytest
import yaml

from tests.conftest import response_head, start_server, write_repository

KEY = {"Authorization": "Bearer sk-user"}
LIMIT = 16 * 1024 * 1024
DEEP = b"[" * 100_000
GENERATE = {"text_input": "Hi", "parameters": {"max_tokens": 1}}


def nest(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    keys = root.parent / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [{"key": "sk-user"}]}))
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(keys)], root)
    yield server
    server.stop()


def _chunked(server, path: str, headers: dict[str, str]) -> socket.socket:
    """A raw connection that has sent the head of a chunked POST and no body yet."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, "Transfer-Encoding": "chunked",
                                                   "Content-Type": "application/json", **headers}.items())
    sock.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode())
    return sock


def _send_chunk(sock: socket.socket, data: bytes) -> None:
    sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def _response_head(sock: socket.socket) -> str:
    return response_head(sock).decode("latin-1").lower()


def test_the_key_is_checked_before_the_body_is_read(server):
    sock = _chunked(server, "/v1/completions", {})
    try:
        _send_chunk(sock, b'{"model": "tiny", "prompt": "')      # the body never ends
        head = _response_head(sock)                              # answered all the same
        while sock.recv(65536):                                  # then closed (a recv timeout fails the test):
            pass                                                 # the server reads no more of the body
    finally:
        sock.close()
    assert head.startswith("http/1.1 401") and "connection: close" in head


def test_a_chunked_body_stops_at_the_limit(server):
    sock = _chunked(server, "/v2/models/tiny/generate", KEY)
    try:
        piece = b" " * (1024 * 1024)
        for _ in range(LIMIT // len(piece)):
            _send_chunk(sock, piece)
        _send_chunk(sock, b" ")                                  # one byte over; the body is still open
        head = _response_head(sock)
    finally:
        sock.close()
    assert head.startswith("http/1.1 413") and "connection: close" in head
    assert httpx.post(f"{server.url}/v2/models/tiny/generate", json=GENERATE, headers=KEY).status_code == 200


def test_deep_json_without_a_key_is_401_not_500(server):
    r = httpx.post(f"{server.url}/v2/repository/index", content=DEEP)
    assert r.status_code == 401 and "API key" in r.json()["error"]


@pytest.mark.parametrize("path", ["/v2/repository/index", "/v2/models/tiny/generate", "/v2/models/tiny/infer"])
def test_deep_json_is_400_on_v2_and_the_connection_survives(server, path):
    with httpx.Client(base_url=server.url, headers=KEY, timeout=60) as client:
        for body in (DEEP, b"[" * 65 + b"]" * 65, json.dumps({"text_input": "x", "a": nest(64)}).encode()):
            r = client.post(path, content=body)
            assert r.status_code == 400 and "deeper than 64" in r.json()["error"]
            port = r.extensions["network_stream"].get_extra_info("socket").getsockname()[1]
            ok = client.post("/v2/models/tiny/generate", json=GENERATE)
            assert ok.status_code == 200
            assert ok.extensions["network_stream"].get_extra_info("socket").getsockname()[1] == port


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_deep_json_is_400_on_v1(server, path):
    with httpx.Client(base_url=server.v1.removesuffix("/v1"), headers=KEY, timeout=60) as client:
        for body in (DEEP, json.dumps({"model": "tiny", "prompt": "x", "user": nest(64)}).encode()):
            r = client.post(path, content=body)
            assert r.status_code == 400
            assert r.json()["error"]["code"] == "invalid_json" and "deeper than 64" in r.json()["error"]["message"]
        ok = client.post("/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 1})
        assert ok.status_code == 200


def test_json_at_the_depth_limit_is_parsed(server):
    r = httpx.post(f"{server.url}/v2/models/tiny/generate", headers=KEY, json={"text_input": "Hi", "extra": nest(62)})
    assert r.status_code == 400 and "unknown input 'extra'" in r.json()["error"]   # the route saw the body

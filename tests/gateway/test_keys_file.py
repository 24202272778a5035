"""The keys file's reload on SIGHUP (gateway/cli.py wires the signal; gateway/keys_file.py validates), through a
real `conch serve` process: a rewritten file takes effect (the new key works, the removed one is refused), and a
file that is not valid is refused whole, the keys in force staying."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import Server, start_server, write_repository


def _write(path: Path, keys: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump({"keys": keys}))
    tmp.replace(path)                                 # whole, as an operator's deploy writes it


@pytest.fixture
def served(tmp_path):
    root = write_repository(tmp_path / "repo", {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    keys = tmp_path / "keys.yaml"
    _write(keys, [{"key": "sk-a", "name": "a"}, {"key": "sk-b", "name": "b", "models": ["tiny"]}])
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(keys)], tmp_path)
    yield server, keys
    server.stop()


def _status(server: Server, secret: str) -> int:
    return httpx.get(f"{server.v1}/models", headers={"Authorization": f"Bearer {secret}"}, timeout=30).status_code


def _hup_and_wait(server: Server, line: str) -> None:
    """SIGHUP, then wait for the reload's `line` in the server's log (the handler runs in its main thread)."""
    assert server.log is not None
    seen = server.log.read_text().count(line)
    server.process.send_signal(signal.SIGHUP)
    for _ in range(300):
        if server.log.read_text().count(line) > seen:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {line!r} in the log after SIGHUP:\n{server.log.read_text()[-2000:]}")


def test_sighup_reloads_the_keys_and_a_bad_file_keeps_them(served):
    server, keys = served
    assert (_status(server, "sk-a"), _status(server, "sk-b"), _status(server, "sk-c")) == (200, 200, 401)

    _write(keys, [{"key": "sk-a", "name": "a"}, {"key": "sk-c", "name": "c"}])
    _hup_and_wait(server, "keys reloaded: 2 keys")
    assert (_status(server, "sk-a"), _status(server, "sk-b"), _status(server, "sk-c")) == (200, 401, 200)

    _write(keys, [{"key": "sk-a", "name": "a"}, {"key": "sk-d", "name": "d", "tpm": "x"}])
    _hup_and_wait(server, "keys file reload refused")
    assert "entry 1 (name 'd')" in server.log.read_text() and "sk-d" not in server.log.read_text()
    assert (_status(server, "sk-a"), _status(server, "sk-c"), _status(server, "sk-d")) == (200, 200, 401)
    assert server.process.poll() is None                # the server lives on

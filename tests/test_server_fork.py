"""tests/server_fork.py: a forked `conch serve` ends as the command does in a fresh interpreter (its exit code,
its message in its log), and its Popen-shaped handle reports a signal's end as Popen does."""
from __future__ import annotations

import signal
import subprocess
import sys

from tests import server_fork
from tests.conftest import free_port, wait_ready, write_repository

BAD = ["serve", "--keep-alive-timeout", "-1"]


def test_a_refused_start_exits_as_the_command_does(tmp_path):
    log = tmp_path / "forked.log"
    forked = server_fork.start(BAD, log)
    fresh = subprocess.run([sys.executable, "-m", "conch.gateway.cli", *BAD], capture_output=True, text=True,
                           timeout=120)
    assert forked.wait(120) == fresh.returncode != 0
    assert "--keep-alive-timeout must be >= 0 seconds" in log.read_text()
    assert "--keep-alive-timeout must be >= 0 seconds" in fresh.stderr


def test_a_signal_ends_it_as_popen_reports_it(tmp_path):
    port, log = free_port(), tmp_path / "forked.log"
    root = write_repository(tmp_path / "repo", {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    forked = server_fork.start(["serve", "--host", "127.0.0.1", "--port", str(port), "--model-repository",
                                str(root), "--grpc-port", "0"], log)
    wait_ready(forked, f"http://127.0.0.1:{port}", log, 240)
    assert forked.poll() is None
    forked.send_signal(signal.SIGKILL)
    assert forked.wait(30) == -signal.SIGKILL

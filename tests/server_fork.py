"""`conch serve` processes forked from one that has already imported the server's modules (a zygote, as
Android's and Chromium's start their processes): a test server starts in ~2 s where a fresh interpreter spends
~4 s importing torch, transformers' modeling stack and the gateway before its model loads. The zygote starts
once per test session, on the first server a test asks for, and ends with it; each server is a real
`conch serve` (the CLI's own main(), its own process, port and log) that differs from
`python -m conch.gateway.cli serve` only in not importing.

Safe to fork: the zygote only imports (no OpenMP region has run, no event loop, no thread of its own; numpy's
OpenBLAS server thread is rebuilt by OpenBLAS's own fork handler). A value a module reads from the environment
at import time is the zygote's, so a caller that passes environment variables of its own gets a fresh
interpreter instead (`enabled`). CONCH_TEST_FORK=0 turns forking off.

Protocol (`python -m tests.server_fork`): a JSON line on stdin {argv, log, env, cwd} -> the child's pid on a
line of stdout; a child's exit status goes to LOG.exit when the zygote reaps it (Popen's returncode: negative,
the signal that ended it); stdin's end ends the zygote and kills the children it still has."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# what every server imports before it serves: the gateway, the engine's backend (torch, transformers' modeling
# stack through the HF runner), the default models' HF classes
PRELOAD = ("conch.gateway.cli", "conch.gateway.app", "conch.engine.backends.conch.backend",
           "transformers.models.llama.modeling_llama", "transformers.models.bert.modeling_bert")
_lock = threading.Lock()
_zygote: subprocess.Popen | None = None


def enabled(env: dict | None) -> bool:
    return not env and os.environ.get("CONCH_TEST_FORK", "1") != "0"


def start(argv: list[str], log: Path) -> ForkedProcess:
    """`conch ARGV` forked, stdout and stderr into `log`, with this process's environment and cwd."""
    global _zygote
    request = json.dumps({"argv": argv, "log": str(log), "env": dict(os.environ), "cwd": os.getcwd()})
    with _lock:
        if _zygote is None or _zygote.poll() is not None:
            _zygote = subprocess.Popen([sys.executable, "-m", "tests.server_fork"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
        assert _zygote.stdin is not None and _zygote.stdout is not None
        _zygote.stdin.write(request + "\n")
        _zygote.stdin.flush()
        reply = _zygote.stdout.readline()
    if not reply.strip().isdigit():
        raise RuntimeError(f"the test servers' zygote did not fork (exit {_zygote.poll()}): {reply!r}")
    return ForkedProcess(int(reply), log)


class ForkedProcess:
    """subprocess.Popen's surface the tests use (pid, poll, wait, terminate, kill, send_signal, returncode)
    over a zygote's child, whose exit status the zygote writes to LOG.exit."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid = pid
        self.args = f"conch serve (forked, log {log.name})"
        self._status = log.with_name(log.name + ".exit")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


# -- the zygote ------------------------------------------------------------------------------------------
def _child(request: dict[str, Any]) -> None:
    """In the forked child: the caller's output file, environment and cwd, then the CLI's main; never returns."""
    code = 0
    try:
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for target in (1, 2):
            os.dup2(fd, target)
        os.close(fd)
        os.close(null)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = [sys.executable, "-m", "conch.gateway.cli", *request["argv"]]
        from conch.gateway.cli import main

        main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _reap(logs: dict[int, str]) -> None:
    """Each exited child's status into its LOG.exit (written whole: a reader sees it all or none)."""
    while logs:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        log = logs.pop(pid, None)
        if log is not None:
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            Path(log + ".exit.tmp").write_text(str(code))
            os.replace(log + ".exit.tmp", log + ".exit")


def _zygote_main() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:            # another venv (.venv-vllm) without one of them: the child imports what it needs
            pass
    logs: dict[int, str] = {}
    stdin = sys.stdin
    try:
        while True:
            ready, _, _ = select.select([stdin], [], [], 0.05)
            _reap(logs)
            if not ready:
                continue
            line = stdin.readline()
            if not line:
                break
            request = json.loads(line)
            Path(request["log"] + ".exit").unlink(missing_ok=True)
            pid = os.fork()
            if pid == 0:
                _child(request)
            logs[pid] = request["log"]
            print(pid, flush=True)
    finally:
        for pid in logs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    _zygote_main()

"""The OpenAI Agents SDK as a real client. It imports as `agents` and installs in the same venv as Conch (whose
layers import as `conch.*`). Each test runs a script in a process of its own, outside the repository, because
the SDK keeps process-wide defaults (`set_default_openai_api`, its default client) that one test would leak
into the next."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_agents_sdk(script: str, args: list[str], workdir: Path, timeout: float = 300,
                   python: Path | str = sys.executable) -> str:
    """Run `script` with `python` (this venv's) in `workdir`; its stdout. Fails the test with the script's output
    when it exits non-zero."""
    path = workdir / "agents_sdk_script.py"
    path.write_text(script)
    done = subprocess.run([str(python), str(path), *args], cwd=workdir, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout

"""The OpenAI Agents SDK as a real client. Its import package is `agents`, the name of Conch's own package, so
it is installed in a venv of its own (`.venv-agents-sdk`, made by `make setup-dev` from
tests/clients/agents-sdk.txt) and each test runs a script there, outside the repository, against the server."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PYTHON = Path(__file__).resolve().parent.parent / ".venv-agents-sdk" / "bin" / "python"


def run_agents_sdk(script: str, args: list[str], workdir: Path, timeout: float = 300) -> str:
    """Run `script` with the Agents SDK's Python in `workdir`; its stdout. Fails the test with the script's
    output when it exits non-zero."""
    if not PYTHON.exists():
        pytest.fail(f"{PYTHON} is missing: `make setup-dev` creates it")
    path = workdir / "agents_sdk_script.py"
    path.write_text(script)
    done = subprocess.run([str(PYTHON), str(path), *args], cwd=workdir, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout

"""The built wheel installs as one namespace, `conch`, beside the OpenAI Agents SDK (import name `agents`):
nothing else lands in site-packages, and an Agents SDK round trip runs through a Conch started from that
install, both in one environment."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.agents_sdk import run_agents_sdk
from tests.conftest import free_port, wait_ready, write_repository

ROOT = Path(__file__).resolve().parent.parent

_ROUND_TRIP = """
import asyncio, sys
from pathlib import Path
from openai import AsyncOpenAI
import agents, conch.agents, conch.gateway
from agents import Agent, ModelSettings, Runner, set_default_openai_api, set_default_openai_client, set_tracing_disabled

assert agents.Agent is Agent and not hasattr(conch.agents, "Agent"), "two packages, two names"
assert Path(conch.gateway.__file__).is_relative_to(sys.argv[3]), conch.gateway.__file__   # the wheel's copy
set_default_openai_client(AsyncOpenAI(base_url=sys.argv[1], api_key="none", max_retries=0))
set_default_openai_api("responses")
set_tracing_disabled(True)
agent = Agent(name="hi", instructions="Answer briefly.", model=sys.argv[2],
              model_settings=ModelSettings(max_tokens=64, temperature=0))
result = asyncio.run(Runner.run(agent, "Say hi", max_turns=1))
assert isinstance(result.final_output, str) and result.raw_responses, result
print("round trip ok", result.raw_responses[0].response_id)
"""


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    """A venv holding only the built wheel; the dependencies (the Agents SDK among them) come from this venv's
    site-packages through a .pth line, which does not run this venv's editable-install hook."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"                       # a copy: setuptools' build/ never sees an earlier build's files
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "build", "dist", "tests", "__pycache__",
                                                                 "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(work)], check=True, cwd=work)
    (wheel,) = work.glob("conch-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"conch", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, tops
    env = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next((env / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True)
    return env


def test_the_wheel_holds_one_namespace_beside_the_agents_sdk(wheel_env, tmp_path):
    site = next((wheel_env / "lib").glob("python*/site-packages"))
    installed = {p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".pth")) and p.name != "bin"}
    assert installed == {"conch"}, installed
    assert not (site / "conch" / "__init__.py").exists()             # a namespace: conch.<layer> only
    assert {p.name for p in (site / "conch").iterdir()} >= {"gateway", "engine", "agents", "grammars"}
    python = wheel_env / "bin" / "python"
    root = write_repository(tmp_path / "repo", {MODEL: {"weights": "builtin:smollm2"}})
    port = free_port()
    log = tmp_path / "server.log"
    proc = subprocess.Popen([str(python), "-m", "conch.gateway.cli", "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--model-repository", str(root)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=tmp_path)
    server = wait_ready(proc, f"http://127.0.0.1:{port}", log, 240)
    try:
        out = run_agents_sdk(_ROUND_TRIP, [server.v1, MODEL, str(site)], tmp_path, python=python)
        assert "round trip ok" in out
    finally:
        server.stop()

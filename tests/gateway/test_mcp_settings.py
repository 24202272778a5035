"""`conch serve --mcp-servers FILE --mcp-allow-origin ORIGIN`: the settings reach the app's state, a bad file
stops the server at start with a message naming the entry, and the MCP call metrics are exposed."""
from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import yaml

from gateway import cli
from tests.conftest import start_server, write_repository


def test_flags_become_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("CALC_AUTH", "Bearer s")
    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://127.0.0.1:9/mcp",
                                                         "headers_from_env": {"Authorization": "CALC_AUTH"}}},
                                    "allow_origins": ["https://b.example.com"]}))
    args = cli._parser().parse_args(["serve", "--mcp-servers", str(path), "--mcp-allow-origin",
                                     "https://A.example.com/", "--mcp-allow-origin", "http://127.0.0.1:9000"])
    config = cli._mcp_config(args)
    assert set(config.registry.servers) == {"calc"}
    assert config.policy.allowed == {"https://a.example.com", "http://127.0.0.1:9000", "https://b.example.com"}


@pytest.mark.parametrize("flags, message", [
    (["--mcp-allow-origin", "not-a-url"], "is not an http(s) URL"),
    (["--mcp-servers", "{missing}"], "No such file"),
    (["--mcp-servers", "{bad}"], "MCP server calc: unknown field(s) ['token']")])
def test_bad_settings_stop_the_server_at_start(tmp_path, flags, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://h/mcp", "token": "x"}}}))
    flags = [f.format(missing=tmp_path / "none.yaml", bad=bad) for f in flags]
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", *flags], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "MCP settings" in done.stderr and message in done.stderr


def test_ray_refuses_the_mcp_flags():
    with pytest.raises(SystemExit, match="--mcp-allow-origin is not supported on Ray"):
        cli.main(["serve", "--ray", "--mcp-allow-origin", "https://a.example.com"])


def test_metrics_expose_mcp_calls(tmp_path):
    from engine.engine import Engine
    from engine.repository import ModelRepository
    from gateway.metrics import Metrics

    metrics = Metrics(Engine(ModelRepository(tmp_path)))
    metrics.on_mcp_call("calc", "add", "ok", 0.02)
    metrics.on_mcp_call("calc", "add", "timeout", 30.0)
    text = metrics.exposition().decode()
    assert 'conch_mcp_calls{server="calc",tool="add",outcome="ok"} 1.0' in text
    assert 'conch_mcp_call_duration_seconds_count{outcome="timeout",server="calc",tool="add"} 1.0' in text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    (root.parent / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://127.0.0.1:9/mcp"}}}))
    server = start_server(["--model-repository", str(root), "--mcp-servers", str(root.parent / "mcp.yaml"),
                           "--mcp-allow-origin", "https://mcp.example.com"], root)
    yield server
    server.stop()


def test_a_server_with_mcp_settings_serves_and_exposes_the_series(server):
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert "# TYPE conch_mcp_calls counter" in text
    assert "# TYPE conch_mcp_call_duration_seconds histogram" in text

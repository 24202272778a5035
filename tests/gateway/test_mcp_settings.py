"""`conch serve --mcp-servers FILE --mcp-allow-origin ORIGIN`: the settings reach the app's state, a bad file
stops the server at start with a message naming the entry, and the MCP call metrics are exposed."""
from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import yaml

from conch.gateway import cli
from tests.conftest import start_server, write_repository


def test_flags_become_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("CALC_AUTH", "Bearer s")
    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://127.0.0.1:9/mcp",
                                                         "headers_from_env": {"Authorization": "CALC_AUTH"}}},
                                    "allow_origins": ["https://b.example.com"]}))
    args = cli._parser().parse_args(["serve", "--mcp-servers", str(path), "--mcp-allow-origin",
                                     "https://A.example.com/", "--mcp-allow-origin", "http://127.0.0.1:9000",
                                     "--mcp-loop-timeout", "30"])
    config = cli._mcp_config(args)
    assert set(config.registry.servers) == {"calc"} and config.limits.loop_timeout_s == 30
    assert config.policy.allowed == {"https://a.example.com", "http://127.0.0.1:9000", "https://b.example.com"}


@pytest.mark.parametrize("flags, message", [
    (["--mcp-allow-origin", "not-a-url"], "is not an http(s) URL"),
    (["--mcp-loop-timeout", "0"], "--mcp-loop-timeout must be positive"),
    (["--mcp-servers", "{missing}"], "No such file"),
    (["--mcp-servers", "{bad}"], "MCP server calc: unknown field(s) ['token']")])
def test_bad_settings_stop_the_server_at_start(tmp_path, flags, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://h/mcp", "token": "x"}}}))
    flags = [f.format(missing=tmp_path / "none.yaml", bad=bad) for f in flags]
    done = subprocess.run([sys.executable, "-m", "conch.gateway.cli", "serve", *flags], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "MCP settings" in done.stderr and message in done.stderr


def test_ray_carries_the_face_flags_to_its_ingress(tmp_path, monkeypatch):
    """`conch serve --ray` takes the MCP, alias and billing-header flags into RaySettings (each ingress replica
    builds its faces from them), and refuses a bad one before Ray starts."""
    import conch.gateway.ray.run as run

    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump({"servers": {"calc": {"url": "http://127.0.0.1:9/mcp"}}}))
    seen = []
    monkeypatch.setattr(run, "serve_ray", lambda settings, *rest: seen.append(settings))
    cli.main(["serve", "--ray", "--mcp-servers", str(path), "--mcp-allow-origin", "https://a.example.com",
              "--mcp-loop-timeout", "30", "--model-alias", "claude-*=m", "--keep-billing-header"])
    s = seen[0]
    assert (s.mcp_servers, s.mcp_allow_origin, s.mcp_loop_timeout) == (str(path), ("https://a.example.com",), 30)
    assert s.model_alias == ("claude-*=m",) and s.keep_billing_header
    with pytest.raises(SystemExit, match="MCP settings: --mcp-loop-timeout must be positive"):
        cli.main(["serve", "--ray", "--mcp-loop-timeout", "0"])
    with pytest.raises(SystemExit, match="--model-alias"):
        cli.main(["serve", "--ray", "--model-alias", "nomodel"])
    assert len(seen) == 1


def test_metrics_expose_mcp_calls(tmp_path):
    from conch.engine.engine import Engine
    from conch.engine.repository import ModelRepository
    from conch.gateway.metrics import Metrics

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

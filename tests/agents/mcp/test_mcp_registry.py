"""agents/mcp/registry.py: the admin's servers file, headers from the environment, and a request naming a
registered server (HTTP, or a stdio command) by label without a URL."""
from __future__ import annotations

import json

import pytest
import yaml

from conch.agents.mcp import McpConfig, McpRegistry, McpToolRequest
from conch.agents.mcp.client import open_session
from conch.agents.mcp.types import McpFailure, Transport
from tests.mcp_servers import stdio_command


def write(tmp_path, data, name="mcp.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


def test_load_yaml_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("CALC_AUTH", "Bearer from-env")
    data = {"allow_origins": ["https://mcp.example.com", {"origin": "http://mcp.internal:8080", "private": True}],
            "servers": {"calc": {"url": "http://127.0.0.1:9/mcp", "headers_from_env": {"Authorization": "CALC_AUTH"},
                                 "allowed_tools": ["add"]},
                        "old": {"url": "http://127.0.0.1:9/sse", "transport": "sse"},
                        "local": {"command": "python -m tools"}},
            "keys": {"team-a": {"calc": "*"}}}
    for name in ("mcp.yaml", "mcp.json"):
        registry = McpRegistry.load(write(tmp_path, data, name))
        calc = registry.servers["calc"]
        assert calc.allowed_tools == {"add"} and calc.transport is Transport.STREAMABLE_HTTP
        assert calc.target().headers == {"Authorization": "Bearer from-env"}
        assert "from-env" not in repr(calc.target()) and "from-env" not in repr(calc)
        assert registry.servers["old"].transport is Transport.SSE
        assert registry.servers["local"].command == ("python", "-m", "tools")
        assert registry.origins.allowed == {"https://mcp.example.com", "http://mcp.internal:8080"}
        assert registry.origins.private == {"http://mcp.internal:8080"}
        assert registry.grants.restricted and registry.grants.tools("team-a", "calc") is None


@pytest.mark.parametrize("data, message", [
    ({"servers": {"x": {"url": "http://h/mcp", "headers": {"A": "b"}}}}, "unknown field(s) ['headers']"),
    ({"servers": {"x": {"url": "http://h/mcp", "headers_from_env": {"A": "NOT_SET_ANYWHERE"}}}},
     "NOT_SET_ANYWHERE not set"),
    ({"servers": {"x": {}}}, "stdio takes a command"),
    ({"servers": {"x": {"url": "http://h/mcp", "transport": "carrier-pigeon"}}}, "carrier-pigeon"),
    ({"server": {}}, "unknown section(s) ['server']"),
    ({"allow_origins": ["https://user:pw@h"]}, "credentials")])
def test_bad_files_name_the_entry(tmp_path, data, message):
    with pytest.raises(ValueError) as raised:
        McpRegistry.load(write(tmp_path, data))
    assert message in str(raised.value)


async def test_registered_servers_by_label(tools_http, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLS_AUTH", "Bearer registered-secret")
    registry = McpRegistry.load(write(tmp_path, {"servers": {
        "calc": {"url": tools_http.url, "headers_from_env": {"Authorization": "TOOLS_AUTH"}},
        "local": {"command": stdio_command()}}}))
    config = McpConfig(registry=registry)
    offer = await config.resolve(McpToolRequest("calc"), key=None)
    async with open_session(offer.target, config.limits) as session:
        assert (await session.call("whoami", {})).text == "Bearer registered-secret"
    offer = await config.resolve(McpToolRequest("local"), key=None)
    async with open_session(offer.target, config.limits) as session:
        assert (await session.call("add", {"a": 1, "b": 2})).text == "3"


async def test_an_env_variable_gone_at_connect_is_a_failure_not_a_crash(tools_http, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLS_AUTH", "x")
    registry = McpRegistry.load(write(tmp_path, {"servers": {
        "calc": {"url": tools_http.url, "headers_from_env": {"Authorization": "TOOLS_AUTH"}}}}))
    monkeypatch.delenv("TOOLS_AUTH")
    with pytest.raises(McpFailure, match="TOOLS_AUTH not set"):
        await McpConfig(registry=registry).resolve(McpToolRequest("calc"), key=None)

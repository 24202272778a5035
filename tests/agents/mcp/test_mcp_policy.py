"""agents/mcp/policy.py and access.py: which server_url a request may reach and which tools a key may use.
The drills of the issue: an unlisted URL, a loopback URL, a URL that redirects to an unlisted host, a key
without the server, a tool outside allowed_tools."""
from __future__ import annotations

import pytest

from conch.agents.mcp import McpConfig, McpRegistry, McpToolRequest, OriginPolicy
from conch.agents.mcp import policy as policy_module
from conch.agents.mcp.client import open_session
from conch.agents.mcp.policy import Grant, KeyGrants, origin_of
from conch.agents.mcp.types import FailureKind, McpFailure


@pytest.mark.parametrize("url, origin", [
    ("https://MCP.example.com/mcp", "https://mcp.example.com"),
    ("https://mcp.example.com:443/x", "https://mcp.example.com"),
    ("http://127.0.0.1:9000/mcp", "http://127.0.0.1:9000"),
    ("http://[::1]:9000/mcp", "http://[::1]:9000")])
def test_origin_of(url, origin):
    assert origin_of(url) == origin


@pytest.mark.parametrize("url", ["ftp://x/y", "mcp.example.com", "https://user:pw@mcp.example.com/mcp"])
def test_origin_of_refuses(url):
    with pytest.raises(ValueError):
        origin_of(url)


async def refusal(policy: OriginPolicy, url: str) -> str:
    with pytest.raises(McpFailure) as raised:
        await policy.check(url)
    assert raised.value.kind is FailureKind.REFUSED
    return raised.value.reason


async def test_unlisted_url_is_refused():
    policy = OriginPolicy.of(["https://mcp.example.com"])
    assert "not in the gateway's MCP allow-list" in await refusal(policy, "https://evil.example.net/mcp")
    assert "allow-list" in await refusal(policy, "http://mcp.example.com/mcp")     # another scheme
    assert "allow-list" in await refusal(policy, "https://mcp.example.com:8443/mcp")   # another port


async def test_loopback_and_metadata_urls_are_refused_unless_listed():
    policy = OriginPolicy.of(["https://mcp.example.com"])
    for url in ("http://127.0.0.1:8000/mcp", "http://localhost:8000/mcp", "http://169.254.169.254/latest",
                "http://[::1]:8000/mcp", "http://10.0.0.7/mcp"):
        assert "allow-list" in await refusal(policy, url)
    listed = OriginPolicy.of(["http://127.0.0.1:8000"])
    assert await listed.check("http://127.0.0.1:8000/mcp") == "http://127.0.0.1:8000"


async def test_listed_name_resolving_to_a_private_address_is_refused(monkeypatch):
    async def resolve(host: str) -> list[str]:
        return {"mcp.example.com": ["93.184.216.34", "10.1.2.3"], "public.example.com": ["93.184.216.34"],
                "mapped.example.com": ["::ffff:127.0.0.1"]}[host]

    monkeypatch.setattr(policy_module, "_resolve", resolve)
    policy = OriginPolicy.of(["https://mcp.example.com", "https://public.example.com",
                              "https://mapped.example.com"])
    assert "non-public address (10.1.2.3)" in await refusal(policy, "https://mcp.example.com/mcp")
    assert "non-public" in await refusal(policy, "https://mapped.example.com/mcp")
    assert await policy.check("https://public.example.com/mcp") == "https://public.example.com"
    private = OriginPolicy.of(private=["https://mcp.example.com"])
    assert await private.check("https://mcp.example.com/mcp") == "https://mcp.example.com"


async def test_a_listed_origin_that_redirects_off_it_is_refused(rogue):
    """The redirect target (the tools server as `localhost`) is never listed: the session refuses to follow."""
    config = McpConfig(origins=OriginPolicy.of([rogue.origin]))
    offer = await config.resolve(McpToolRequest("r", server_url=rogue.url + "/redirect"), key=None)
    with pytest.raises(McpFailure) as raised:
        async with open_session(offer.target, config.limits):
            pass
    assert raised.value.kind is FailureKind.REFUSED and "not followed" in raised.value.reason


def test_key_grants():
    grants = KeyGrants({"team-a": Grant({"calc": frozenset({"add"}), "files": None}),
                        "*": Grant({"calc": frozenset({"lookup"})})}, restricted=True)
    assert grants.tools("team-a", "calc") == {"add"}
    assert grants.tools("team-a", "files") is None
    assert grants.tools("someone-else", "calc") == {"lookup"}
    assert grants.tools(None, "calc") == {"lookup"}                  # an open server is the "*" key
    with pytest.raises(McpFailure, match="may not use the MCP server files"):
        grants.tools("someone-else", "files")
    assert KeyGrants().tools("anyone", "anything") is None          # no keys section: no limits


async def test_resolve_applies_every_filter(tools_http):
    registry = McpRegistry.from_mapping({
        "servers": {"calc": {"url": tools_http.url, "allowed_tools": ["add", "lookup"]}},
        "keys": {"team-a": {"calc": ["add", "whoami"], tools_http.origin: "*"}, "team-b": {}}})
    config = McpConfig(registry=registry, origins=OriginPolicy.of([tools_http.origin]))
    offer = await config.resolve(McpToolRequest("calc"), key="team-a")
    assert offer.tool_filter == {"add"}                             # registered list & grant
    offer = await config.resolve(McpToolRequest("calc", allowed_tools=frozenset({"lookup"})), key="team-a")
    assert offer.tool_filter == frozenset()                         # nothing left: nothing offered
    direct = await config.resolve(McpToolRequest("mine", server_url=tools_http.url), key="team-a")
    assert direct.tool_filter is None and direct.target.metric_name == tools_http.origin
    for request, key, reason in [
            (McpToolRequest("calc"), "team-b", "may not use the MCP server calc"),
            (McpToolRequest("mine", server_url=tools_http.url), "team-b", "may not use the MCP server"),
            (McpToolRequest("nope"), "team-a", "names no MCP server registered"),
            (McpToolRequest("calc", server_url=tools_http.url), "team-a", "is a registered MCP server")]:
        with pytest.raises(McpFailure) as raised:
            await config.resolve(request, key)
        assert raised.value.kind is FailureKind.REFUSED and reason in raised.value.reason

"""An MCP server that lists tools whose input schemas cannot be served as a grammar (tests/mcp_servers/
unservable_server.py: `match`'s pattern has a look-ahead, `stop`'s only value is a special token's text), through
a real server: a request that offers such a tool is a 400 naming the tool and its server (the tool's field,
`tools[i].server_url`, as `param`), decided before generation, whole or streamed, never a 500 and never a
failed response; the same server's other tools serve (`allowed_tools` leaves the unservable one out). The
behaviour is gateway/openai/responses/mcp_schemas.py's."""
from __future__ import annotations

import httpx
import pytest

from tests.conftest import start_server, write_repository
from tests.mcp_servers import McpProcess, start as start_mcp


@pytest.fixture(scope="module")
def unservable() -> McpProcess:
    server = start_mcp("unservable_server")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, unservable):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}})
    server = start_server(["--model-repository", str(root), "--mcp-allow-origin", unservable.origin], root)
    yield server
    server.stop()


def _request(url: str, allowed: list[str] | None, choice, **fields) -> dict:
    tool = {"type": "mcp", "server_label": "odd", "server_url": url, "require_approval": "never"}
    tool |= {"allowed_tools": allowed} if allowed is not None else {}
    return {"model": "tiny", "input": "hi", "tools": [tool],
            "tool_choice": choice, "max_tool_calls": 1, "max_output_tokens": 4, **fields}


def _post(gateway, body: dict) -> httpx.Response:
    return httpx.post(f"{gateway.v1}/responses", json=body, timeout=300)


@pytest.mark.parametrize(("allowed", "choice", "tool", "why"), [
    (None, "auto", "match", "look-around"),                                  # refused when the schema is checked
    (["add", "match"], "required", "match", "look-around"),
    (["stop"], {"type": "mcp", "server_label": "odd", "name": "stop"}, "stop", "special token"),  # by the probe
    (["stop"], "required", "stop", "special token"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_an_unservable_mcp_tool_is_a_400_naming_it(gateway, unservable, allowed, choice, tool, why, stream):
    r = _post(gateway, _request(unservable.url, allowed, choice, stream=stream))
    assert r.status_code == 400, r.text[:500]
    error = r.json()["error"]
    assert f"'{tool}'" in error["message"] and "'odd'" in error["message"] and why in error["message"], error
    assert error["param"] == "tools.0.server_url" and error["code"] == "invalid_mcp_tool_schema", error


def test_the_servers_other_tools_serve(gateway, unservable):
    r = _post(gateway, _request(unservable.url, ["add"], {"type": "mcp", "server_label": "odd", "name": "add"}))
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert body["output"][0]["type"] == "mcp_list_tools" and [t["name"] for t in body["output"][0]["tools"]] == ["add"]
    assert body["status"] in ("completed", "incomplete") and body["error"] is None, body
    assert all(item["name"] == "add" for item in body["output"] if item["type"] == "mcp_call"), body["output"]


@pytest.mark.parametrize("stream", [False, True])
def test_an_unservable_tool_among_others_under_required_is_never_a_500(gateway, unservable, stream):
    """The probe walks one branch of a choice of tools (here `add`'s): the request is served, and a model that
    takes `stop`'s branch ends its response failed."""
    r = _post(gateway, _request(unservable.url, ["add", "stop"], "required", stream=stream))
    assert r.status_code in (200, 400), r.text[:500]
    if r.status_code == 200 and not stream:
        assert r.json()["status"] in ("completed", "incomplete", "failed"), r.text[:500]

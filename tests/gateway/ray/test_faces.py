"""The faces' flags on a real local Ray (issue 31): MCP tools on /v1/responses and Claude model aliases on
/v1/messages work through two ingress replicas sharing a Redis response store, and a response paused for
approval on one ingress replica resumes on the other. SmolLM2 (the MCP turns need a model that answers)."""
from __future__ import annotations

import anthropic
import httpx
import pytest

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.conftest import write_repository
from tests.gateway.openai.responses.test_mcp import check_add, forced, mcp_tool, request
from tests.ray_helpers import start_ray_server, stop_ray_server

pytestmark = pytest.mark.slow                      # a Ray cluster, SmolLM2, MCP loops on two shared cores


@pytest.fixture(scope="module")
def server(ray_head, redis_server, tools_http, tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 4}})
    s = start_ray_server(ray_head, ["--model-repository", str(root), "--replicas", "1", "--ingress-replicas", "2",
                                    "--response-store", redis_server.url, "--mcp-allow-origin", tools_http.origin,
                                    "--mcp-loop-timeout", "900", "--model-alias", f"claude-*={MODEL}"], root)
    yield s
    stop_ray_server(s, graceful=False)             # the module's cluster stops next


def post(server, body: dict) -> httpx.Response:
    r = httpx.post(f"{server.v1}/responses", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r


def test_an_approval_paused_on_one_ingress_resumes_on_the_other(server, tools_http):
    tool = mcp_tool(tools_http.url, require_approval="always")
    first = post(server, request([tool], forced()))
    paused = first.json()
    assert [item["type"] for item in paused["output"]] == ["mcp_list_tools", "mcp_approval_request"]
    asked = paused["output"][1]
    approve = request([tool], "auto", previous_response_id=paused["id"], input=[
        {"type": "mcp_approval_response", "approval_request_id": asked["id"], "approve": True}])
    for _ in range(12):                            # the proxy picks an ingress replica per request
        resumed = post(server, approve)
        if resumed.headers["x-conch-ingress"] != first.headers["x-conch-ingress"]:
            break
    assert resumed.headers["x-conch-ingress"] != first.headers["x-conch-ingress"]
    call = resumed.json()["output"][0]
    check_add(call)
    assert call["approval_request_id"] == asked["id"] and call["arguments"] == asked["arguments"]


def test_claude_names_are_aliased(server):
    with anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0, timeout=600) as client:
        message = client.messages.create(model="claude-sonnet-4-5", max_tokens=4,
                                         messages=[{"role": "user", "content": "Say hi."}])
    assert message.model == "claude-sonnet-4-5" and message.content and message.stop_reason == "max_tokens"

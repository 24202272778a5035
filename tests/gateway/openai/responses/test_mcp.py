"""The `mcp` tool on /v1/responses through a real server (SmolLM2, keys, an MCP servers file) against real MCP
servers (tests/mcp_servers/): the openai SDK whole and streamed, the loop running a real `add` call, approvals
round trip by previous_response_id, function and MCP tools mixed, failures as items, the Agents SDK's
HostedMCPTool, security drills (each a 4xx), a secret header nowhere (the record store is a real Redis, read
directly), a client gone cancelling the call, and background responses (polled, cancelled mid-call, paused on
an approval and resumed).
A small model rarely calls a tool unasked, so the tests force it (tool_choice naming it) and bound the loop
(max_tool_calls 1: the turn after the call answers)."""
from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
import redis
import yaml

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.agents_sdk import run_agents_sdk
from tests.conftest import start_server, write_repository
from tests.gateway.openai.responses.checks import EVENT, check_stream, valid_response
from tests.mcp_servers import free_port

SECRET = "sk-conch-test-secret-7f3a9c"          # a request header's value: never stored, echoed, logged, counted
REGISTERED_SECRET = "Bearer conch-registered-51d2e0"
KEY_A, KEY_B = "sk-team-a", "sk-team-b"
QUESTION = "What is 2 plus 3? Use the add tool."
# The answering turn's format: a short JSON object the grammar ends, so the response completes within its tokens
SUM = {"type": "json_schema", "name": "answer", "strict": True, "schema": {
    "type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"], "additionalProperties": False}}


@pytest.fixture(scope="module")
def mcp_servers(tools_http, failing, hanging, rogue):
    return {"tools": tools_http, "failing": failing, "hanging": hanging, "rogue": rogue}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, mcp_servers, redis_server):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        MODEL: {"weights": "builtin:smollm2", "dtype": "float32", "max_batch_size": 8}})
    down = f"http://127.0.0.1:{free_port()}"                       # allowed, but nothing listens there
    origins = [s.origin for s in mcp_servers.values()] + [down]
    (root / "keys.yaml").write_text(yaml.safe_dump({"keys": [
        {"key": KEY_A, "name": "team-a", "metrics": True}, {"key": KEY_B, "name": "team-b"}]}))
    (root / "mcp.yaml").write_text(yaml.safe_dump({
        "servers": {"calc": {"url": mcp_servers["tools"].url, "headers_from_env": {"Authorization": "CALC_AUTH"}}},
        "keys": {"team-a": {"calc": "*", **{origin: "*" for origin in origins}}, "team-b": {"calc": ["lookup"]}}}))
    args = ["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml"), "--mcp-servers",
            str(root / "mcp.yaml"), "--log-level", "debug", "--mcp-loop-timeout", "900",   # 2 shared CPUs
            "--response-store", redis_server.url]
    for origin in origins:
        args += ["--mcp-allow-origin", origin]
    server = start_server(args, root, env={"CALC_AUTH": REGISTERED_SECRET})
    server.down = down
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(gateway):
    return openai.OpenAI(base_url=gateway.v1, api_key=KEY_A, max_retries=0, timeout=600)


def mcp_tool(url: str, label: str = "calc_url", **fields) -> dict:
    return {"type": "mcp", "server_label": label, "server_url": url, "allowed_tools": ["add"],
            "require_approval": "never", **fields}


def forced(label: str = "calc_url", name: str = "add") -> dict:
    return {"type": "mcp", "server_label": label, "name": name}


def request(tools: list, choice, **fields) -> dict:
    return {"model": MODEL, "input": QUESTION, "tools": tools, "tool_choice": choice, "max_tool_calls": 1,
            "max_output_tokens": 48, "temperature": 0, "text": {"format": SUM}, **fields}


def post(gateway, body: dict, key: str = KEY_A) -> httpx.Response:
    return httpx.post(f"{gateway.v1}/responses", json=body, headers={"Authorization": f"Bearer {key}"},
                      timeout=600)


def check_add(item: dict) -> None:
    """An mcp_call of `add` that ran: its output is the sum of the model's arguments."""
    args = json.loads(item["arguments"])
    assert item["type"] == "mcp_call" and item["name"] == "add" and item["status"] == "completed"
    assert item["output"] == str(args["a"] + args["b"]) and item["error"] is None


def test_whole_response_runs_the_loop(gateway, mcp_servers):
    reply = post(gateway, request([mcp_tool(mcp_servers["tools"].url)], forced()))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    valid_response(body)
    kinds = [item["type"] for item in body["output"]]
    assert kinds[:2] == ["mcp_list_tools", "mcp_call"] and kinds[-1] == "message", kinds
    listed = body["output"][0]
    assert listed["server_label"] == "calc_url" and [t["name"] for t in listed["tools"]] == ["add"]  # lookup: never
    check_add(body["output"][1])
    assert isinstance(json.loads(body["output"][-1]["content"][0]["text"])["sum"], int)     # the answering turn
    assert body["status"] == "completed" and body["usage"]["output_tokens"] > 0
    assert body["tools"][0]["server_url"] == mcp_servers["tools"].url


def test_stream_helper_accepts_the_sequence(client, gateway, mcp_servers):
    body = request([mcp_tool(mcp_servers["tools"].url)], forced())
    with client.responses.stream(**body) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert types.count("response.created") == 1 and types[-1] == "response.completed"
    order = ["response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
             "response.mcp_call.in_progress", "response.mcp_call_arguments.delta",
             "response.mcp_call_arguments.done", "response.mcp_call.completed"]
    assert [t for t in types if t in order] == order
    assert [item.type for item in final.output][:2] == ["mcp_list_tools", "mcp_call"]
    events = raw_stream(gateway, body)
    args = [e for e in events if e["type"].startswith("response.mcp_call_arguments")]
    assert args[0]["delta"] == args[1]["arguments"]
    check_add(events[-1]["response"]["output"][1])


def raw_stream(gateway, body: dict, key: str = KEY_A) -> list[dict]:
    events = []
    with httpx.stream("POST", f"{gateway.v1}/responses", json={**body, "stream": True},
                      headers={"Authorization": f"Bearer {key}"}, timeout=600) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: "):]))
                EVENT.validate_python(events[-1])
    check_stream(events)
    return events


def test_approval_round_trip(client, mcp_servers):
    tool = mcp_tool(mcp_servers["tools"].url, require_approval="always")
    first = client.responses.create(**request([tool], forced()))
    assert [item.type for item in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    assert first.status == "completed"
    asked = first.output[1]
    approved = client.responses.create(**request([tool], "auto", input=[
        {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}]),
        previous_response_id=first.id)
    kinds = [item.type for item in approved.output]
    assert kinds[0] == "mcp_call" and "mcp_list_tools" not in kinds          # listed once per conversation
    call = approved.output[0].model_dump()
    check_add(call)
    assert call["approval_request_id"] == asked.id and call["arguments"] == asked.arguments
    denied = client.responses.create(**request([tool], "auto", input=[
        {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": False, "reason": "no"}]),
        previous_response_id=first.id)
    assert "mcp_call" not in [item.type for item in denied.output]
    with pytest.raises(openai.BadRequestError, match="approval_request_id"):
        client.responses.create(**request([tool], "auto", input=[
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_nope", "approve": True}]),
            previous_response_id=first.id)


def test_function_and_mcp_tools_mix(client, mcp_servers):
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    response = client.responses.create(**request([weather, mcp_tool(mcp_servers["tools"].url)],
                                                 {"type": "function", "name": "get_weather"},
                                                 input="Weather in Paris?"))
    assert [item.type for item in response.output] == ["mcp_list_tools", "function_call"]   # back to the client
    assert response.output[1].name == "get_weather"


def test_failures_are_items_and_the_response_goes_on(client, gateway, mcp_servers):
    failing = mcp_tool(mcp_servers["failing"].url, label="broken", allowed_tools=["refuse"])
    response = client.responses.create(**request([failing], forced("broken", "refuse"), input="Try it."))
    call = response.output[1]
    assert call.type == "mcp_call" and call.status == "failed" and response.status in ("completed", "incomplete")
    assert "not allowed today" in call.error.content[0]["text"] and response.output[-1].type == "message"
    down = mcp_tool(f"{gateway.down}/mcp", label="down")
    response = client.responses.create(**request([down], "auto", input="Hi"))
    assert response.output[0].type == "mcp_list_tools" and response.output[0].error
    assert response.status == "completed" and response.output[-1].type == "message"


@pytest.mark.parametrize("tool, choice, key, param", [
    ({"server_url": "https://mcp.unlisted.example/mcp"}, "auto", KEY_A, "tools.0.server_url"),
    ({"server_url": "http://127.0.0.1:1/mcp"}, "auto", KEY_A, "tools.0.server_url"),          # loopback, unlisted
    ({"server_url": "{rogue}/redirect"}, "auto", KEY_A, "tools.0.server_url"),               # off-origin redirect
    ({"server_url": "{tools}"}, "auto", KEY_B, "tools.0.server_url"),                        # not in team-b's grant
    ({"server_url": "{tools}"}, forced(name="lookup"), KEY_A, "tool_choice"),                # outside allowed_tools
    ({"server_label": "calc", "server_url": None}, forced("calc", "add"), KEY_B, "tool_choice"),   # key: lookup only
    ({"server_label": "nowhere", "server_url": None}, "auto", KEY_A, "tools.0.server_label"),
    ({"require_approval": "sometimes"}, "auto", KEY_A, "tools.0.require_approval"),
    ({"connector_id": "connector_gmail"}, "auto", KEY_A, "tools.0.connector_id")])
def test_security_drills(gateway, mcp_servers, tool, choice, key, param):
    urls = {"rogue": mcp_servers["rogue"].url, "tools": mcp_servers["tools"].url}
    fields = {k: v.format(**urls) if isinstance(v, str) else v for k, v in tool.items()}
    wire = {k: v for k, v in {**mcp_tool(mcp_servers["tools"].url), **fields}.items() if v is not None}
    for stream in (False, True):
        reply = post(gateway, request([wire], choice, stream=stream), key)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == param


def test_a_secret_header_is_nowhere(client, gateway, mcp_servers, redis_server):
    tool = mcp_tool(mcp_servers["tools"].url, headers={"X-Conch-Test": SECRET}, authorization=SECRET)
    whole = post(gateway, request([tool], forced()))
    assert whole.status_code == 200 and whole.json()["output"][1]["status"] == "completed"
    assert "headers" not in whole.json()["tools"][0] and "authorization" not in whole.json()["tools"][0]
    streamed = raw_stream(gateway, request([tool], forced()))
    stored = client.responses.retrieve(whole.json()["id"]).model_dump_json()
    items = client.responses.input_items.list(whole.json()["id"]).model_dump_json()
    metrics = httpx.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30).text
    assert 'conch_mcp_calls{server="' + mcp_servers["tools"].origin + '",tool="add",outcome="ok"}' in metrics
    detached = wait_for(client, client.responses.create(**request([tool], forced()), background=True).id)
    assert detached.status == "completed" and detached.output[1].status == "completed"
    records = redis_records(redis_server)
    assert whole.json()["id"] in records and detached.id in records                 # the store was read
    for text in (whole.text, json.dumps(streamed), stored, items, metrics, gateway.log.read_text(), records):
        assert SECRET not in text and REGISTERED_SECRET not in text


def redis_records(server) -> str:
    """Every record Conch wrote to the store, as one text."""
    link = redis.Redis.from_url(server.url)
    return "\n".join(link.get(key).decode() for key in link.scan_iter("*"))


def wait_for(client, response_id: str, until=lambda r: r.status not in ("queued", "in_progress")):
    """The background response once `until` holds (polled), or the test fails after a generous bound."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        polled = client.responses.retrieve(response_id)
        if until(polled):
            return polled
        time.sleep(0.3)
    pytest.fail(f"{response_id} stayed {polled.status}")


def test_background_response_runs_the_loop(client, mcp_servers):
    queued = client.responses.create(**request([mcp_tool(mcp_servers["tools"].url)], forced()), background=True)
    assert queued.status == "queued" and queued.background and queued.output == []
    done = wait_for(client, queued.id)
    assert done.status == "completed" and done.background
    assert [item.type for item in done.output][:2] == ["mcp_list_tools", "mcp_call"]
    check_add(done.output[1].model_dump())
    assert done.output[-1].type == "message"


def test_background_cancel_cancels_the_mcp_call(client, gateway, mcp_servers):
    tool = mcp_tool(mcp_servers["hanging"].url, label="slow", allowed_tools=["wait"])
    series = 'conch_mcp_calls{server="' + mcp_servers["hanging"].origin + '",tool="wait",outcome="cancelled"}'
    before = metric(gateway, series)
    queued = client.responses.create(**request([tool], forced("slow", "wait"), input="Wait."), background=True)
    running = wait_for(client, queued.id, lambda r: any(
        item.type == "mcp_call" and item.status == "in_progress" for item in r.output))
    assert running.status == "in_progress" and running.output[0].type == "mcp_list_tools"   # a GET shows the call
    cancelled = client.with_options(timeout=60).responses.cancel(queued.id)        # the call sleeps an hour
    assert cancelled.status == "cancelled" and client.responses.retrieve(queued.id).status == "cancelled"
    assert metric(gateway, series) == before + 1                                   # the MCP call was cancelled


def metric(gateway, series: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30).text
    lines = [line for line in text.splitlines() if line.startswith(series + " ")]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_background_approval_ends_it_and_resumes(client, mcp_servers):
    tool = mcp_tool(mcp_servers["tools"].url, require_approval="always")
    first = wait_for(client, client.responses.create(**request([tool], forced()), background=True).id)
    assert first.status == "completed" and [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    resumed = client.responses.create(**request([tool], "auto", input=[
        {"type": "mcp_approval_response", "approval_request_id": first.output[1].id, "approve": True}]),
        previous_response_id=first.id, background=True)
    done = wait_for(client, resumed.id)
    assert done.status == "completed" and done.output[0].type == "mcp_call"
    check_add(done.output[0].model_dump())


def test_a_client_gone_cancels_the_call(gateway, mcp_servers):
    tool = mcp_tool(mcp_servers["hanging"].url, label="slow", allowed_tools=["wait"])
    series = 'conch_mcp_calls{server="' + mcp_servers["hanging"].origin + '",tool="wait",outcome="cancelled"}'
    before = metric(gateway, series)              # the background cancel test counts on the same series
    body = {**request([tool], forced("slow", "wait"), input="Wait."), "stream": True}
    with httpx.stream("POST", f"{gateway.v1}/responses", json=body, headers={"Authorization": f"Bearer {KEY_A}"},
                      timeout=600) as reply:
        for line in reply.iter_lines():
            if "response.mcp_call.in_progress" in line:
                break                                  # the call is running: hang up
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if metric(gateway, series) == before + 1:
            return
        time.sleep(0.5)
    pytest.fail(f"the call was not cancelled: {series} stayed at {metric(gateway, series)}")


_AGENT_SCRIPT = """
import asyncio, sys
from openai import AsyncOpenAI
from pydantic import BaseModel
from agents import (Agent, HostedMCPTool, MCPListToolsItem, ModelSettings, Runner, ToolCallItem,
                    set_default_openai_client, set_tracing_disabled)

set_default_openai_client(AsyncOpenAI(base_url=sys.argv[1], api_key=sys.argv[3], max_retries=0))
set_tracing_disabled(True)
approvals = []

def approve(request):
    approvals.append(request.data.name)
    return {"approve": True}

tool = HostedMCPTool(tool_config={"type": "mcp", "server_label": "calc_url", "server_url": sys.argv[4],
                                  "allowed_tools": ["add"]}, on_approval_request=approve)
class Answer(BaseModel):
    sum: int

agent = Agent(name="calc", instructions="Use the add tool, then answer.", model=sys.argv[2], tools=[tool],
              output_type=Answer,
              model_settings=ModelSettings(tool_choice="required", max_tokens=48, temperature=0,
                                           extra_args={"max_tool_calls": 1}))

def check(items):
    kinds = [type(item).__name__ for item in items]
    assert "MCPListToolsItem" in kinds, kinds
    calls = [item.raw_item for item in items if isinstance(item, ToolCallItem) and item.raw_item.type == "mcp_call"]
    assert calls and calls[0].name == "add" and calls[0].output, kinds
    return calls[0].output

async def main():
    result = await Runner.run(agent, "What is 2 plus 3?", max_turns=4)
    assert isinstance(result.final_output, Answer), result.final_output
    whole = check(result.new_items)
    streamed = Runner.run_streamed(agent, "What is 2 plus 3?", max_turns=4)
    kinds = [event.type async for event in streamed.stream_events()]
    assert "raw_response_event" in kinds and isinstance(streamed.final_output, Answer)
    check(streamed.new_items)
    assert approvals == ["add", "add"], approvals
    print("agents ok", whole)

asyncio.run(main())
"""


def test_agents_sdk_hosted_mcp_tool(gateway, mcp_servers, tmp_path):
    """HostedMCPTool with its defaults (require_approval: always, OpenAI's), approved by its callback: the SDK
    sends the approval back with the history as input items, and the loop resumes."""
    out = run_agents_sdk(_AGENT_SCRIPT, [gateway.v1, MODEL, KEY_A, mcp_servers["tools"].url], tmp_path, timeout=900)
    assert "agents ok" in out

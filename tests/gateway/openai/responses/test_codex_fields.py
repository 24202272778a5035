"""What Codex CLI (and the Open Responses conformance suite) send to /v1/responses besides the prompt: store false,
prompt_cache_key, client_metadata, a namespace tool, a hosted web_search tool (dropped, and named back), presence
and frequency penalties, an unknown previous_response_id, /v1/responses/compact and /input_tokens, a model
alias; and x-request-id on the OpenAI face. Reasoning fields are not exercised here."""
from __future__ import annotations

import httpx
import openai
import pytest

from tests.conftest import start_server, write_repository
from tests.gateway.openai.responses.checks import valid_response

ALIAS = "gpt-5-codex"
LS = {"type": "function", "name": "exec_command", "description": "Run a command",
      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
NAMESPACE = {"type": "namespace", "name": "multi_agent_v1", "description": "Agents",
             "tools": [{"type": "function", "name": "close_agent", "description": "Close an agent", "strict": False,
                        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]}
CODEX = {"model": ALIAS, "store": False, "prompt_cache_key": "01a24995-thread", "parallel_tool_calls": True,
         "client_metadata": {"thread_id": "01a24995-thread", "x-codex-window-id": "w:0"}, "tool_choice": "auto",
         "tools": [LS, NAMESPACE, {"type": "web_search", "external_web_access": False}]}


def _server(tmp_path_factory, *flags: str):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8}})
    return start_server(["--model-repository", str(root), "--model-alias", "gpt-*=tiny", *flags], root)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = _server(tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.v1, timeout=300) as c:
        yield c


@pytest.fixture(scope="module")
def client(server):
    c = openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    yield c
    c.close()


def test_a_codex_shaped_request_is_answered_and_the_hosted_tool_drop_is_named(http):
    r = http.post("/responses", json={**CODEX, "input": "List the files", "max_output_tokens": 3})
    assert r.status_code == 200, r.text
    assert r.headers["conch-hosted-tools-dropped"] == "web_search"
    assert r.headers["x-request-id"].startswith("req_")
    body = r.json()
    valid_response(body)
    assert body["model"] == ALIAS and body["store"] is False and body["prompt_cache_key"] == "01a24995-thread"
    assert "client_metadata" not in body
    echoed = {t.get("name", t["type"]): t for t in body["tools"]}
    assert echoed["exec_command"]["strict"] is True                    # OpenAI's default, echoed
    assert echoed["multi_agent_v1"]["tools"][0]["name"] == "close_agent"
    streamed = http.post("/responses", json={**CODEX, "input": "List the files", "max_output_tokens": 2,
                                             "stream": True})
    assert streamed.status_code == 200 and streamed.headers["conch-hosted-tools-dropped"] == "web_search"


def test_a_namespaced_function_is_offered_under_its_name_and_its_call_names_the_namespace(http):
    """The call forced through the real engine (tool_choice names the function: its grammar)."""
    r = http.post("/responses", json={**CODEX, "input": "Close agent 7",
                                      "tool_choice": {"type": "function", "name": "close_agent"}})
    assert r.status_code == 200, r.text
    (call,) = [item for item in r.json()["output"] if item["type"] == "function_call"]
    assert call["name"] == "close_agent" and call["namespace"] == "multi_agent_v1"
    clash = {**NAMESPACE, "tools": [{**LS, "type": "function"}]}
    r = http.post("/responses", json={"model": ALIAS, "input": "x", "tools": [LS, clash]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools.1.tools.0.name"


def test_penalties_are_accepted_and_echoed(http):
    r = http.post("/responses", json={"model": ALIAS, "input": "hi", "max_output_tokens": 2,
                                      "presence_penalty": 0.5, "frequency_penalty": -0.5})
    assert r.status_code == 200
    body = r.json()
    assert body["presence_penalty"] == 0.5 and body["frequency_penalty"] == -0.5
    plain = http.post("/responses", json={"model": ALIAS, "input": "hi", "max_output_tokens": 1}).json()
    assert plain["presence_penalty"] == 0 and plain["frequency_penalty"] == 0
    bad = http.post("/responses", json={"model": ALIAS, "input": "hi", "presence_penalty": 3})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "presence_penalty"


def test_an_unknown_previous_response_id_is_previous_response_not_found(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=ALIAS, input="hi", previous_response_id="resp_gone")
    assert err.value.code == "previous_response_not_found" and err.value.param == "previous_response_id"
    assert err.value.request_id and err.value.request_id.startswith("req_")     # x-request-id on errors too


def test_input_tokens_counts_what_create_renders(client, http):
    r = http.post("/responses/input_tokens", json={"model": ALIAS, "input": "Say hi", "tools": [LS]})
    assert r.status_code == 200 and r.json()["object"] == "response.input_tokens"
    created = client.responses.create(model=ALIAS, input="Say hi", tools=[LS], max_output_tokens=1)
    assert r.json()["input_tokens"] == created.usage.input_tokens


def test_compact_returns_a_sealed_item_a_later_turn_reads_back(client, http):
    history = [{"role": "user", "content": "Find the bug in main.py"},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}]
    r = http.post("/responses/compact", json={"model": ALIAS, "input": history, "max_output_tokens": 8})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "response.compaction"
    user, compaction = body["output"]
    assert user["role"] == "user" and compaction["type"] == "compaction"
    assert "main.py" not in compaction["encrypted_content"]                     # opaque
    later = body["output"] + [{"role": "user", "content": "Go on"}]
    counted = http.post("/responses/input_tokens", json={"model": ALIAS, "input": later}).json()["input_tokens"]
    bare = http.post("/responses/input_tokens", json={"model": ALIAS, "input": later[:1] + later[2:]}).json()
    assert counted > bare["input_tokens"]                           # the summary is rendered
    assert client.responses.create(model=ALIAS, input=later, max_output_tokens=1).status == "incomplete"
    forged = [{**compaction, "encrypted_content": compaction["encrypted_content"][:-4] + "AAAA"}]
    r = http.post("/responses", json={"model": ALIAS, "input": forged})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input.0.encrypted_content"


def test_model_alias_applies_to_completions(client):
    completion = client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Hello", max_tokens=2)
    assert completion.model == "gpt-3.5-turbo-instruct" and completion.usage.completion_tokens == 2
    assert completion._request_id and completion._request_id.startswith("req_")


def test_max_tokens_past_the_context_is_a_ceiling_on_chat(client):
    reply = client.chat.completions.create(model=ALIAS, messages=[{"role": "user", "content": "hi"}],
                                           max_tokens=32000)
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens <= 2048


@pytest.fixture(scope="module")
def refusing(tmp_path_factory):
    server = _server(tmp_path_factory, "--hosted-tools", "refuse")
    yield server
    server.stop()


def test_the_refuse_policy_names_the_hosted_tool(refusing):
    r = httpx.post(f"{refusing.v1}/responses", json={**CODEX, "input": "hi"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools.2.type"
    assert "--hosted-tools" in r.json()["error"]["message"]

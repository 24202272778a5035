"""The fields and routes Claude Code (and litellm's Anthropic route) send besides the prompt: context_management
edits, anthropic-beta values (known and unknown), `?beta=true`, the session header, max_tokens past the
context, count_tokens past the context, the top-level output_format. Thinking is not exercised here."""
from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from tests.gateway.anthropic.conftest import KEY

CLAUDE = "claude-sonnet-4-5"
BARE = {"model": CLAUDE, "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}
TOOLS = [{"name": "Bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]


def _history(n: int, result: str) -> list[dict]:
    """A user turn, then n tool_use / tool_result pairs, then a user turn."""
    messages: list[dict] = [{"role": "user", "content": "List the files."}]
    for i in range(n):
        use = f"toolu_{i:024d}"
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": use, "name": "Bash",
                                                        "input": {"command": f"ls dir{i}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use, "content": result}]}]
    messages.append({"role": "user", "content": "Now summarize."})
    return messages


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers={"x-api-key": KEY}, timeout=120) as c:
        yield c


CLEAR = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 2},
                    "keep": {"type": "tool_uses", "value": 1}, "clear_tool_inputs": True}]}


def test_clear_tool_uses_clears_all_but_the_kept_results(client):
    messages = _history(3, "file_a.txt file_b.txt " * 40)
    plain = client.messages.count_tokens(model=CLAUDE, tools=TOOLS, messages=messages).input_tokens
    edited = client.messages.count_tokens(model=CLAUDE, tools=TOOLS, messages=messages,
                                          extra_body={"context_management": CLEAR}).input_tokens
    assert edited < plain - 2 * 200            # two results of ~400 tokens each are gone
    raw = client.messages.with_raw_response.create(
        model=CLAUDE, max_tokens=2, tools=TOOLS, messages=messages, extra_body={"context_management": CLEAR})
    body = raw.http_response.json()
    (applied,) = body["context_management"]["applied_edits"]
    assert applied["type"] == "clear_tool_uses_20250919" and applied["cleared_tool_uses"] == 2
    assert applied["cleared_input_tokens"] > 2 * 200
    assert body["usage"]["input_tokens"] + body["usage"]["cache_read_input_tokens"] == edited


def test_an_edit_whose_trigger_is_not_reached_changes_nothing(client):
    messages = _history(1, "one file")
    edits = {"edits": [{"type": "clear_tool_uses_20250919"},                      # default: 100,000 tokens
                       {"type": "clear_thinking_20251015", "keep": "all"}]}
    raw = client.messages.with_raw_response.create(model=CLAUDE, max_tokens=2, tools=TOOLS, messages=messages,
                                                   extra_body={"context_management": edits})
    assert raw.http_response.json()["context_management"] == {"applied_edits": []}


def test_clear_thinking_drops_all_but_the_last_thinking_turn(client):
    messages = [{"role": "user", "content": "Hi"}]
    for i in range(3):
        messages += [{"role": "assistant", "content": [{"type": "thinking", "thinking": f"plan {i}", "signature": ""},
                                                       {"type": "text", "text": f"answer {i}"}]},
                     {"role": "user", "content": "more"}]
    edits = {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]}
    raw = client.messages.with_raw_response.create(model=CLAUDE, max_tokens=2, messages=messages,
                                                   extra_body={"context_management": edits})
    (applied,) = raw.http_response.json()["context_management"]["applied_edits"]
    assert applied["type"] == "clear_thinking_20251015" and applied["cleared_thinking_turns"] == 2


def test_an_unknown_edit_is_refused_by_name(http):
    r = http.post("/v1/messages", json={**BARE, "context_management": {"edits": [{"type": "compact_20990101"}]}})
    assert r.status_code == 400 and "context_management" in r.json()["error"]["message"]


def test_beta_query_and_headers_are_accepted_and_unknown_betas_are_named_back(http):
    """Claude Code's request line and headers: POST /v1/messages?beta=true, its betas, its session header."""
    betas = "claude-code-20250219, context-management-2025-06-27,no-such-beta-2099-01-01"
    r = http.post("/v1/messages?beta=true", json={**BARE, "metadata": {"user_id": "user_1"}},
                  headers={"anthropic-beta": betas, "X-Claude-Code-Session-Id": "8d1f6a0e-session"})
    assert r.status_code == 200 and r.json()["type"] == "message"
    assert r.headers["conch-ignored-betas"] == "no-such-beta-2099-01-01"
    known = http.post("/v1/messages?beta=true", json=BARE, headers={"anthropic-beta": "claude-code-20250219"})
    assert known.status_code == 200 and "conch-ignored-betas" not in known.headers


def test_a_system_turn_inside_messages_with_its_own_output_config(http):
    """Claude Code 2.1.332's second message: role system, output_config.effort (per-turn-control-2026-07-01)."""
    messages = [{"role": "user", "content": "Hi"},
                {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /tmp"}],
                 "output_config": {"effort": "medium"}}]
    body = {**BARE, "messages": messages}
    r = http.post("/v1/messages?beta=true", json=body, headers={"anthropic-beta": "per-turn-control-2026-07-01"})
    assert r.status_code == 200 and "conch-ignored-betas" not in r.headers
    counted = http.post("/v1/messages/count_tokens", json={k: v for k, v in body.items() if k != "max_tokens"})
    without = http.post("/v1/messages/count_tokens", json={"model": CLAUDE, "messages": messages[:1]})
    assert counted.json()["input_tokens"] > without.json()["input_tokens"]        # rendered in its place
    use = {"role": "system", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
    r = http.post("/v1/messages", json={**BARE, "messages": [messages[0], use]})
    assert r.status_code == 400


@pytest.mark.slow            # generates to the end of the context; the engine's conformance test holds the rule
def test_max_tokens_past_the_context_is_a_ceiling(client):
    """Claude Code's max_tokens: 32000 on a 2,048-token model: generate what fits, not a 400."""
    with client.messages.stream(model=CLAUDE, max_tokens=32000, messages=[{"role": "user", "content": "Hi"}]) \
            as stream:
        reply = stream.get_final_message()
    assert reply.stop_reason in ("end_turn", "max_tokens")
    assert reply.usage.input_tokens + reply.usage.cache_read_input_tokens + reply.usage.output_tokens <= 2048


def test_count_tokens_counts_a_body_longer_than_the_context(client):
    long = "word " * 3000
    count = client.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": long}]).input_tokens
    assert count > 3000
    with pytest.raises(anthropic.BadRequestError, match="context length"):
        client.messages.create(model=CLAUDE, max_tokens=4, messages=[{"role": "user", "content": long}])


SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}


def test_top_level_output_format_is_output_config_format(client):
    reply = client.messages.create(model=CLAUDE, max_tokens=20, messages=[{"role": "user", "content": "ok?"}],
                                   extra_body={"output_format": {"type": "json_schema", "schema": SCHEMA},
                                               "temperature": 0})
    assert set(json.loads(reply.content[0].text)) == {"ok"}


def test_output_format_and_output_config_format_together_are_refused(http):
    fmt = {"type": "json_schema", "schema": SCHEMA}
    r = http.post("/v1/messages", json={**BARE, "output_format": fmt, "output_config": {"format": fmt}})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("output_format")

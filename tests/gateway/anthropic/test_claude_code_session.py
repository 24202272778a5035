"""A replayed Claude-Code-shaped session: a long system prompt behind a billing line that changes every request,
tools, three turns of tool_use / tool_result, and a `claude-haiku-*` background call between them. Every turn is
answered, and turns 2 and 3 reuse the KV of the session's shared head (the billing line is dropped from the
prompt, so the head is the same tokens each turn): cache_read_input_tokens >= 90% of it."""
from __future__ import annotations

import uuid

TOOLS = [
    {"name": "Read", "description": "Read a file from the local filesystem.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}},
    {"name": "Bash", "description": "Run a shell command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
]
GUIDE = " ".join(f"Rule {i}: keep answers short, read files before editing them, and never guess paths."
                 for i in range(24))


def _system() -> list[dict]:
    billing = f"x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=cli; cch={uuid.uuid4().hex[:5]};"
    return [{"type": "text", "text": billing},
            {"type": "text", "text": "You are Claude Code, a coding agent. " + GUIDE,
             "cache_control": {"type": "ephemeral"}}]


def _turn(client, messages: list[dict]):
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=4, system=_system(), tools=TOOLS,
                                  messages=messages, extra_body={"temperature": 0}, metadata={"user_id": "u1"},
                                  extra_headers={"anthropic-beta": "claude-code-20250219"})


def _tool_step(n: int, tool: str, arg: dict, result: str) -> list[dict]:
    use_id = f"toolu_{n:024d}"
    return [{"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
                                              {"type": "tool_use", "id": use_id, "name": tool, "input": arg}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": result}]}]


def test_a_claude_code_session_reuses_its_head(client):
    first = [{"role": "user", "content": "What does setup.py install?"}]
    head = client.messages.count_tokens(model="claude-sonnet-4-5", system=_system(), tools=TOOLS,
                                        messages=first).input_tokens
    assert head > 400
    turns = [_turn(client, first)]
    background = client.messages.create(model="claude-haiku-4-5-20251001", max_tokens=4,
                                        system="Write a 3-word title for the conversation.",
                                        messages=[{"role": "user", "content": "setup.py question"}])
    assert background.content and background.model == "claude-haiku-4-5-20251001"
    history = first + _tool_step(1, "Read", {"file_path": "setup.py"}, "from setuptools import setup")
    turns.append(_turn(client, history))
    history += _tool_step(2, "Bash", {"command": "pip show conch"}, "Name: conch\nVersion: 0.1")
    turns.append(_turn(client, history))
    assert all(t.content and t.stop_reason in ("end_turn", "max_tokens", "tool_use") for t in turns)
    for later in turns[1:]:
        assert later.usage.cache_read_input_tokens >= 0.9 * head, later.usage

"""Tools into the prompt. A chat template that accepts `tools` renders them itself; for one that does not,
Conch's documented default applies: the tools' JSON schemas go into the system prompt, assistant calls are
written as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` and tool results come back as
`<tool_response>` blocks in a user turn (the hermes convention, parsed by the `hermes` parser)."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from agents.tools import ToolFunction

DEFAULT_TOOL_SYSTEM = (
    "You can call functions to help with the user's request. The functions are described by these JSON "
    "schemas:\n<tools>\n{tools}\n</tools>\nTo call functions, answer with one block per call and nothing "
    "else:\n<tool_call>\n{{\"name\": <function name>, \"arguments\": <arguments object>}}\n</tool_call>"
)


def template_accepts_tools(tokenizer: Any) -> bool:
    return "tools" in (getattr(tokenizer, "chat_template", None) or "")


def tool_dicts(tools: Sequence[ToolFunction]) -> list[dict]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.schema}} for t in tools]


def with_default_tool_prompt(messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolFunction]) -> list[dict]:
    """Messages rewritten for a template that knows nothing of tools."""
    out = [_plain(m) for m in messages]
    if tools:
        listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tool_dicts(tools))
        system = DEFAULT_TOOL_SYSTEM.format(tools=listing)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{system}"}
        else:
            out.insert(0, {"role": "system", "content": system})
    return out


def _plain(message: Mapping[str, Any]) -> dict:
    role, content = message["role"], message.get("content") or ""
    if role == "assistant" and message.get("tool_calls"):
        calls = "\n".join(_call_block(c["function"]) for c in message["tool_calls"])
        return {"role": "assistant", "content": f"{content}\n{calls}".strip()}
    if role == "tool":
        result = json.dumps({"tool_call_id": message.get("tool_call_id"), "content": content}, ensure_ascii=False)
        return {"role": "user", "content": f"<tool_response>\n{result}\n</tool_response>"}
    return {"role": role, "content": content}


def _call_block(function: Mapping[str, Any]) -> str:
    arguments = function.get("arguments") or "{}"
    try:
        arguments = json.loads(arguments)
    except ValueError:
        pass
    call = json.dumps({"name": function["name"], "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{call}\n</tool_call>"

"""Tools into the prompt, for a chat template that does not accept `tools` (one that does renders them
itself: `template_accepts_tools`). Conch's default: the tools' JSON schemas go into the system prompt inside
`<tools>...</tools>`, followed by the format's own instruction; earlier assistant calls are written back in
the format's own syntax; `tool` messages come back as `<tool_response>` blocks in a user turn."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conch.agents.tools import ToolFunction

TOOL_LISTING = ("You can call functions to help with the user's request. The functions are described by these "
                "JSON schemas:\n<tools>\n{tools}\n</tools>\n")

CallWriter = Callable[[Sequence[tuple[str, Any]]], str]   # [(name, arguments)] -> the format's text


def template_accepts_tools(tokenizer: Any) -> bool:
    return "tools" in (getattr(tokenizer, "chat_template", None) or "")


def tool_dicts(tools: Sequence[ToolFunction]) -> list[dict]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.schema}} for t in tools]


def with_tool_prompt(messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolFunction], instruction: str,
                     write_calls: CallWriter) -> list[dict]:
    """Messages rewritten for a template that knows nothing of tools."""
    out = [_plain(m, write_calls) for m in messages]
    if tools:
        listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tool_dicts(tools))
        system = TOOL_LISTING.format(tools=listing) + instruction
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{system}"}
        else:
            out.insert(0, {"role": "system", "content": system})
    return out


def _plain(message: Mapping[str, Any], write_calls: CallWriter) -> dict:
    role, content = message["role"], message.get("content") or ""
    thought = {"reasoning_content": message["reasoning_content"]} if message.get("reasoning_content") else {}
    if role == "assistant" and message.get("tool_calls"):
        calls = write_calls([_name_and_arguments(c["function"]) for c in message["tool_calls"]])
        return {"role": "assistant", "content": f"{content}\n{calls}".strip(), **thought}
    if thought:
        return {"role": role, "content": content, **thought}
    if role == "tool":
        result = json.dumps({"tool_call_id": message.get("tool_call_id"), "content": content}, ensure_ascii=False)
        return {"role": "user", "content": f"<tool_response>\n{result}\n</tool_response>"}
    return {"role": role, "content": content}


def _name_and_arguments(function: Mapping[str, Any]) -> tuple[str, Any]:
    arguments = function.get("arguments") or "{}"
    try:
        arguments = json.loads(arguments)
    except ValueError:
        pass
    return function["name"], arguments

"""One chat answer's tool calls through the openai SDK, whole or reassembled from the stream the way a client
does it, checking OpenAI's stream contract on the way (a call's first delta carries its id and name, once)."""
from __future__ import annotations

from typing import Any

Call = tuple[str, str, str]  # (id, name, arguments)


def ask(client: Any, stream: bool, **kwargs: Any) -> tuple[str | None, str | None, list[Call]]:
    """(finish_reason, content, calls) of choice 0."""
    if not stream:
        choice = client.chat.completions.create(**kwargs).choices[0]
        calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]
        return choice.finish_reason, choice.message.content, calls
    content, parts, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            if part.index not in parts:
                assert part.id and part.function.name, part
                parts[part.index] = (part.id, part.function.name, "")
            else:
                assert part.id is None and part.function.name is None, part
            call_id, name, arguments = parts[part.index]
            parts[part.index] = (call_id, name, arguments + (part.function.arguments or ""))
        finish = chunk.choices[0].finish_reason or finish
    return finish, content or None, [parts[i] for i in sorted(parts)]

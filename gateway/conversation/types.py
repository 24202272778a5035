"""The conversation every chat-like face reads its body into.

Shapes are OpenAI chat's, as plain values, so an upstream that speaks chat completions takes them as they are:
    messages     {"role": system|developer|user|assistant|tool, "content": str | [{"type": "text", "text"}
                  | {"type": "image_url", "image_url": {"url"}}] | None,
                  "name"?, "reasoning_content"? (an assistant turn's earlier thinking),
                  "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments"}}], "tool_call_id"?}
    tools        [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
    tool_choice  "none" | "auto" | "required" | {"type": "function", "function": {"name"}} | None
Each face has checked its own wire rules (tool results follow their calls, names are well formed) before
building one; `WirePaths` says how the face names the fields that shared checks may refuse."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conch.engine import SamplingParams
from conch.gateway.conversation.reasoning import Thinking


@dataclass(frozen=True)
class WirePaths:
    """Where a face's body holds what the shared path checks, for the `param` of a 400. `tool_schema` is
    formatted with the tool's index."""

    tool_schema: str = "tools.{index}.function.parameters"
    tools: str = "tools"
    tool_choice: str = "tool_choice"
    messages: str = "messages"
    output_format: str = "response_format"


@dataclass(frozen=True)
class Conversation:
    model: str
    messages: tuple[dict[str, Any], ...]
    sampling: SamplingParams
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # The output constraint as (param, kind, value) fields (engine.build_constraint's input), read off the wire
    # by the face; `response_format` is OpenAI chat's, forwarded as it is to an upstream that takes it.
    constraints: tuple[tuple[str, str, Any], ...] = ()
    response_format: dict[str, Any] | None = None
    stream: bool = False
    use_cache: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    paths: WirePaths = field(default_factory=WirePaths)
    session: str | None = None      # the client's conversation key: Ray's session affinity (engine.types)
    thinking: Thinking = field(default_factory=Thinking)   # the model's reasoning switch and budget
    image_paths: tuple[str, ...] = ()   # each image part's field on the face's wire, in order (images.py)

    @property
    def has_tool_turns(self) -> bool:
        return any(m.get("role") == "tool" or m.get("tool_calls") for m in self.messages)


def template_message(message: dict[str, Any], image: str = "") -> dict[str, Any]:
    """The plain dict a chat template expects: developer is system, content is text, an image part the
    model's placeholder text `image` (engine/images.py's VisionSpec)."""
    role = "system" if message["role"] == "developer" else message["role"]
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(image if part.get("type") == "image_url" else part.get("text", "") for part in content)
    out: dict[str, Any] = {"role": role, "content": content or ""}
    for key in ("name", "tool_calls", "tool_call_id", "reasoning_content"):
        if message.get(key):
            out[key] = message[key]
    return out

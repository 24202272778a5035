"""A Messages body -> the shared `Conversation` (OpenAI chat's shapes), its wire rules checked first:

    system          string or text blocks -> one system message (blocks joined by a blank line); a block that
                    starts with Claude Code's `x-anthropic-billing-header` is dropped unless the server keeps it
                    (it changes every request, so rendering it would defeat every kept slot and prefix cache)
    user blocks     text -> a user message; tool_result -> a tool message (is_error: its text behind "Error: "),
                    in their order; each tool_result names an earlier assistant tool_use (else a 400)
    system turns    a `system` message inside `messages` (Claude Code's per-turn instructions) -> a system message
                    in its place, text blocks only
    assistant       text -> content, tool_use -> tool_calls (input as JSON text); a thinking block whose signature
                    this deployment sealed, or a redacted_thinking block it wrote, -> reasoning_content (the
                    template renders it where the model's own would); any other thinking is dropped; a final
                    assistant turn is a prefill the model continues
    thinking        enabled (budget_tokens, below max_tokens) / adaptive / disabled -> the model's reasoning switch
                    and the budget the engine enforces (gateway/conversation/reasoning.py)
    image           base64 / url source -> an image_url part (a data URL, or the URL the gateway fetches from
                    its allow-list: gateway/conversation/images.py), in a user turn or a tool_result; a model
                    without vision refuses it naming the block
    document        a 400 naming the block (no served model takes them)
    tools           name / description / input_schema -> function tools
    tool_choice     auto / any / tool / none -> auto / required / named / none; disable_parallel_tool_use ->
                    parallel_tool_calls false
    output_config   format {json_schema} -> the output constraint (chat's response_format json_schema)
"""
from __future__ import annotations

import json
from typing import Any

from conch.engine import InvalidRequest, SamplingParams, build_sampling
from conch.gateway.anthropic import schemas as wire
from conch.gateway.conversation import Conversation, WirePaths
from conch.gateway.conversation.reasoning import Thinking
from conch.gateway.conversation.sealed import SealError, unseal
from conch.gateway.errors import APIError

BILLING_HEADER = "x-anthropic-billing-header"
FORMAT_PARAM = "output_config.format"
PATHS = WirePaths(tool_schema="tools.{index}.input_schema", tools="tools", tool_choice="tool_choice",
                  messages="messages", output_format=FORMAT_PARAM)
_WIRE_NAMES = {"stop": "stop_sequences"}     # the sampling table's wire names -> this face's


def conversation(body: wire.CountTokensRequest, model: str, *, keep_billing_header: bool = False,
                 use_cache: bool = True) -> Conversation:
    """`model` is the served model `body.model` resolves to (its alias)."""
    _refuse_unserved(body, model)
    images: list[str] = []
    messages = _system(body.system, keep_billing_header) + _messages(body.messages, images)
    prefill = body.messages[-1].role == "assistant"
    tool_choice, parallel = _tool_choice(body.tool_choice)
    schema = body.output_config.format.schema_ if body.output_config and body.output_config.format else None
    return Conversation(
        model=model, messages=tuple(messages), sampling=sampling(body),
        tools=tuple(_tool(t) for t in body.tools or ()), tool_choice=tool_choice, parallel_tool_calls=parallel,
        constraints=((FORMAT_PARAM, "json_schema", schema),) if schema is not None else (),
        response_format={"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
        if schema is not None else None,
        stream=bool(getattr(body, "stream", False)), use_cache=use_cache,
        add_generation_prompt=not prefill, continue_final_message=prefill, paths=PATHS,
        thinking=_thinking(body), image_paths=tuple(images))


def _refuse_unserved(body: wire.CountTokensRequest, model: str) -> None:
    """What the body asks that no model Conch serves does: a code-execution container."""
    if getattr(body, "container", None) is not None:
        raise APIError(400, "container: Conch runs no code-execution containers", param="container")


def _thinking(body: wire.CountTokensRequest) -> Thinking:
    thinking = body.thinking
    if thinking is None:
        return Thinking()
    if thinking.type == "disabled":
        return Thinking(enabled=False)
    if thinking.type == "adaptive":
        return Thinking(enabled=True)
    budget = thinking.budget_tokens
    if budget is None or budget < 1:
        raise APIError(400, "thinking.budget_tokens: a positive number is required when thinking is enabled",
                       param="thinking.budget_tokens")
    max_tokens = getattr(body, "max_tokens", None)
    if max_tokens is not None and budget >= max_tokens:
        raise APIError(400, f"max_tokens ({max_tokens}) must be greater than thinking.budget_tokens ({budget})",
                       param="max_tokens")
    return Thinking(enabled=True, budget=budget)


def sampling(body: wire.CountTokensRequest) -> SamplingParams:
    """count_tokens' body has no sampling fields: its prompt is the same, its params the defaults."""
    values = {name: getattr(body, name, None) for name in ("max_tokens", "temperature", "top_p", "top_k")}
    values["stop"] = getattr(body, "stop_sequences", None)
    try:
        return build_sampling(values, base=SamplingParams(max_tokens=None), names=_WIRE_NAMES)
    except InvalidRequest as exc:
        raise APIError(400, exc.message, param=exc.param) from exc


def _system(system: str | list[wire.TextBlock] | None, keep_billing_header: bool) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}] if system else []
    texts = [b.text for b in system if keep_billing_header or not b.text.lstrip().startswith(BILLING_HEADER)]
    return [{"role": "system", "content": "\n\n".join(texts)}] if texts else []


def _messages(messages: list[wire.Message], images: list[str]) -> list[dict[str, Any]]:
    """`images` gets each image block's path, in prompt order."""
    out: list[dict[str, Any]] = []
    calls: set[str] = set()
    for i, message in enumerate(messages):
        blocks = [wire.TextBlock(type="text", text=message.content)] if isinstance(message.content, str) \
            else message.content
        for j, block in enumerate(blocks):
            if isinstance(block, wire.MediaBlock) and (block.type != "image" or message.role != "user"):
                raise APIError(400, f"messages[{i}].content[{j}]: {block.type} blocks are not supported here: "
                                    "only a user turn's image blocks are read", param=f"messages.{i}.content.{j}.type")
        if message.role == "assistant":
            out.append(_assistant(blocks, calls))
        elif message.role == "system":
            out.append(_system_turn(i, blocks))
        else:
            out.extend(_user(i, blocks, calls, images))
    return out


def _image_part(block: wire.MediaBlock, path: str, images: list[str]) -> dict[str, Any]:
    """An image block as chat's image_url part: a base64 source as a data URL, a url source as it is."""
    source = block.source
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type') or 'application/octet-stream'};base64,{source['data']}"
    elif kind == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise APIError(400, f"{path}.source: an image source is base64 (media_type, data) or url (url); "
                            f"'{kind}' is not read here", param=f"{path}.source.type")
    images.append(path)
    return {"type": "image_url", "image_url": {"url": url}}


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text parts joined into a string; with an image among them, the parts as they are (text merged)."""
    if not any(p["type"] == "image_url" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _system_turn(i: int, blocks: list) -> dict[str, Any]:
    """A system message inside `messages`: rendered in its place; its blocks are text only."""
    for j, block in enumerate(blocks):
        if not isinstance(block, wire.TextBlock):
            raise APIError(400, f"messages[{i}].content[{j}]: a system message holds text blocks only",
                           param=f"messages.{i}.content.{j}.type")
    return {"role": "system", "content": "".join(b.text for b in blocks)}


def _assistant(blocks: list, calls: set[str]) -> dict[str, Any]:
    text = "".join(b.text for b in blocks if isinstance(b, wire.TextBlock))
    uses = [b for b in blocks if isinstance(b, wire.ToolUseBlock)]
    calls.update(b.id for b in uses)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    reasoning = "".join(_thought(b) for b in blocks)
    if reasoning:
        message["reasoning_content"] = reasoning
    if uses:
        message["tool_calls"] = [{"id": b.id, "type": "function", "function": {
            "name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)}} for b in uses]
    return message


def _thought(block: Any) -> str:
    """The reasoning a thinking block carries, if this deployment wrote it (else nothing: not rendered)."""
    try:
        if isinstance(block, wire.ThinkingBlock) and block.signature:
            return block.thinking if unseal(block.signature) == block.thinking else ""
        if isinstance(block, wire.RedactedThinkingBlock):
            return unseal(block.data)
    except SealError:
        pass
    return ""


def _user(i: int, blocks: list, calls: set[str], images: list[str]) -> list[dict[str, Any]]:
    """Tool results and text in their order; consecutive text and image blocks are one user message."""
    out: list[dict[str, Any]] = []
    text: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        if isinstance(block, wire.TextBlock):
            text.append({"type": "text", "text": block.text})
        elif isinstance(block, wire.MediaBlock):
            text.append(_image_part(block, f"messages.{i}.content.{j}", images))
        elif isinstance(block, wire.ToolResultBlock):
            if block.tool_use_id not in calls:
                raise APIError(400, f"messages[{i}].content[{j}]: tool_result's tool_use_id '{block.tool_use_id}' "
                                    "matches no tool_use block of an earlier assistant message",
                               param=f"messages.{i}.content.{j}.tool_use_id")
            if text:
                out.append({"role": "user", "content": _content(text)})
                text = []
            out.append({"role": "tool", "tool_call_id": block.tool_use_id,
                        "content": _result(block, f"messages.{i}.content.{j}", images)})
        elif isinstance(block, wire.ToolUseBlock):
            raise APIError(400, f"messages[{i}].content[{j}]: tool_use blocks belong to assistant messages",
                           param=f"messages.{i}.content.{j}.type")
        # thinking / redacted_thinking: history of a reasoning model, not rendered
    if text or not out:
        out.append({"role": "user", "content": _content(text)})
    return out


def _result(block: wire.ToolResultBlock, path: str, images: list[str]) -> str | list[dict[str, Any]]:
    """A tool result's text (behind "Error: " when is_error), its image blocks as image parts in place."""
    content = block.content if isinstance(block.content, list) else \
        [wire.TextBlock(type="text", text=block.content or "")]
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Error: "}] if block.is_error else []
    for k, part in enumerate(content):
        if isinstance(part, wire.TextBlock):
            parts.append({"type": "text", "text": part.text})
        elif part.type == "image":
            parts.append(_image_part(part, f"{path}.content.{k}", images))
        else:
            raise APIError(400, f"{path}.content.{k}: {part.type} blocks are not supported: no model Conch serves "
                                "takes them", param=f"{path}.content.{k}.type")
    return _content(parts)


def _tool(tool: wire.Tool) -> dict[str, Any]:
    function = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _tool_choice(choice: wire.ToolChoice | None) -> tuple[str | dict[str, Any] | None, bool | None]:
    if choice is None:
        return None, None
    parallel = None if choice.disable_parallel_tool_use is None else not choice.disable_parallel_tool_use
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}, parallel
    return _CHOICES[choice.type], parallel


_CHOICES = {"auto": "auto", "any": "required", "none": "none"}

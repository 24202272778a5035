"""A conversation -> one engine request: the tool plan, the rendered prompt and its grammar (or the messages
for a backend that renders its own), checked by Engine.prepare."""
from __future__ import annotations

import asyncio
from dataclasses import replace

from conch.agents import render_chat
from conch.agents.reasoning import Phase, ReasoningFormat, reasoning_for_template
from conch.agents.tool_formats.prompt import template_accepts_tools, tool_dicts
from conch.engine import ChatInput, GenerationRequest, InvalidRequest, ReasoningControl
from conch.grammars import GrammarSpec
from conch.gateway.conversation.constraint import conversation_constraint
from conch.gateway.conversation.images import ImagePolicy, image_parts, read_images
from conch.gateway.conversation.reasoning import reasoning_control, template_kwargs
from conch.gateway.conversation.tools import ToolPlan, plan_tools
from conch.gateway.conversation.types import Conversation, template_message
from conch.gateway.conversation.upstream import chat_input
from conch.gateway.errors import APIError


def _prompt(conv: Conversation, tokenizer, plan: ToolPlan, reasoning: ReasoningFormat | None,
            image: str = "") -> str:
    messages = [template_message(m, image) for m in conv.messages]
    tools = None
    if template_accepts_tools(tokenizer):  # it renders the tools, and earlier calls and results, itself
        tools = tool_dicts(plan.tools) if plan.tools else None
    elif plan.format is not None:  # tools, or tool turns, for a template that knows none
        messages = plan.format.prompt(messages, plan.tools)
    return render_chat(tokenizer, messages, tools=tools, add_generation_prompt=conv.add_generation_prompt,
                       continue_final_message=conv.continue_final_message,
                       template_kwargs=template_kwargs(reasoning, conv.thinking))


def _grammar(conv: Conversation, plan: ToolPlan, constraint) -> GrammarSpec | None:
    if constraint is None:
        return plan.grammar
    if plan.grammar is not None:
        raise APIError(400, f"{constraint.param} cannot be combined with tool_choice '{plan.choice.mode}'",
                       param=constraint.param)
    return constraint.spec


def _inputs(conv: Conversation, model) -> tuple[ToolPlan, ChatInput | None, str | None, GrammarSpec | None,
                                              ReasoningControl | None]:
    """The tool plan (each tool's schema checked), and either the messages for a backend that renders its own
    (an upstream) or the rendered prompt and its grammar. A worker thread's work: 20 tools' checks cost ~4 ms,
    a long conversation's template more."""
    plan = plan_tools(conv, model.config.tool_call_parser, model.config.max_parallel_tool_calls)
    constraint = conversation_constraint(conv)
    caps = model.backend.capabilities
    if caps.chat_input:
        return plan, chat_input(conv, plan, constraint, caps.native_tools), None, None, None
    fmt = reasoning_for_template(getattr(model.tokenizer, "chat_template", None))
    vision = caps.vision
    prompt = _prompt(conv, model.tokenizer, plan, fmt, vision.placeholder if vision is not None else "")
    grammar = _grammar(conv, plan, constraint)
    if fmt is None:
        return plan, None, prompt, grammar, None
    phase = fmt.start_phase(prompt)
    control = reasoning_control(fmt, model.tokenizer, phase, conv.thinking) if phase != Phase.ANSWER else None
    return replace(plan, reasoning=(fmt, phase)), None, prompt, grammar, control


def _image_parts(conv: Conversation, model) -> list[tuple[str, str]]:
    """(wire path, url) of the conversation's images; a 400 naming the first when the model has no vision."""
    parts = list(image_parts(conv.messages, conv.image_paths, conv.paths.messages))
    if parts and model.backend.capabilities.vision is None:
        raise InvalidRequest(f"{parts[0][0]}: model '{conv.model}' has no vision: it takes text only, so it cannot "
                             f"read this image (send text, or choose a vision model)", param=parts[0][0])
    return parts


async def build_generation(conv: Conversation, engine, request_id: str,
                           images: ImagePolicy | None = None) -> tuple[GenerationRequest, ToolPlan]:
    """The prepared engine request (sampling checked, prompt tokenized) and the tool plan its output is read by.
    `images`: where image URLs may be fetched from (None: data URLs only)."""
    model = engine.get(conv.model)
    model.generator                   # noqa: B018 -- an embedding model refuses by name, before any chat template
    parts = _image_parts(conv, model)
    pictures = await read_images(parts, images or ImagePolicy()) if parts else ()
    plan, chat, prompt, grammar, control = await asyncio.to_thread(_inputs, conv, model)
    gen = GenerationRequest(id=request_id, model=conv.model, chat=chat, prompt=prompt, params=conv.sampling,
                            grammar=grammar, stream=conv.stream, add_special_tokens=False, use_cache=conv.use_cache,
                            max_tokens_ceiling=True, session=conv.session, reasoning=control, images=pictures)
    return await engine.prepare(gen, prompt_param=conv.paths.messages), plan


async def count_prompt_tokens(conv: Conversation, engine) -> int:
    """The prompt's tokens as build_generation renders it, with no context check: a count, not a request (a
    prompt longer than the context counts too). An upstream's messages count as their rendered text's tokens."""
    model = engine.get(conv.model)
    model.generator                   # noqa: B018 -- an embedding model refuses by name

    _image_parts(conv, model)
    vision = model.backend.capabilities.vision

    def count() -> int:
        _, chat, prompt, _, _ = _inputs(conv, model)
        text = chat.text if chat is not None else prompt or ""
        return len(model.tokenizer.encode(vision.expand(text) if vision is not None else text,
                                          add_special_tokens=False))

    return await asyncio.to_thread(count)

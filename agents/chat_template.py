"""Renders chat messages into a prompt with the model's own chat template."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


class ChatTemplateError(ValueError):
    def __init__(self, message: str, param: str | None = "messages") -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def render_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """Messages as plain dicts (role, content as text, optional tool_calls / tool_call_id, reasoning_content)
    -> prompt text. `template_kwargs` are extra template variables (a reasoning switch such as enable_thinking)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError("this model has no chat template; use /v1/completions", param="model")
    try:
        return tokenizer.apply_chat_template(
            list(messages), tools=list(tools) if tools else None, tokenize=False,
            add_generation_prompt=add_generation_prompt and not continue_final_message,
            continue_final_message=continue_final_message, **dict(template_kwargs or {}),
        )
    except Exception as exc:  # jinja raises TemplateError, or exceptions raised by the template itself
        raise ChatTemplateError(f"the chat template could not render these messages: {exc}") from exc

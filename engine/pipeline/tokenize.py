"""The tokenize step: a request's prompt -> token ids, checked against the model's context length."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from engine.errors import ContextLengthExceeded, InvalidRequest
from engine.types import GenerationRequest

if TYPE_CHECKING:
    from engine.engine import LoadedModel


def tokenize(model: "LoadedModel", request: GenerationRequest, prompt_param: str = "prompt") -> GenerationRequest:
    """The request with `prompt_token_ids` set and `max_tokens` resolved (None: the rest of the context).

    Raises InvalidRequest naming `prompt_param` for an empty prompt or one that, with max_tokens, exceeds the
    context. A model whose own steps change the text first (Capabilities.text_prompt) checks the limits there."""
    ids = request.prompt_token_ids
    if ids is None:
        ids = tuple(model.tokenizer.encode(request.prompt or "", add_special_tokens=request.add_special_tokens))
    if not ids:
        raise InvalidRequest("the prompt is empty", param=prompt_param)
    if model.backend.capabilities.text_prompt:
        return replace(request, prompt_token_ids=ids)
    limit, params = model.context_length, request.params
    if len(ids) >= limit:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {limit} tokens. However, your prompt has "
            f"{len(ids)} tokens. Please reduce the length of the prompt.", param=prompt_param)
    if params.max_tokens is None:
        params = replace(params, max_tokens=limit - len(ids))
    if len(ids) + params.max_tokens > limit:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{len(ids) + params.max_tokens} tokens ({len(ids)} in the prompt, {params.max_tokens} in the "
            f"completion). Please reduce the prompt or max_tokens.", param=prompt_param)
    return replace(request, prompt_token_ids=ids, params=params)

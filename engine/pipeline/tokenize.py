"""The tokenize step: a request's prompt -> token ids, checked against the model's context length.

Runs in a worker thread for any prompt longer than INLINE_CHARS (Engine.prepare), never on the event loop; a
prompt that cannot fit is refused by a cheap lower bound on its token count before it is tokenized
(engine/pipeline/length_bound.py).
"""
from __future__ import annotations

from dataclasses import replace

from conch.engine.errors import ContextLengthExceeded, InvalidRequest
from conch.engine.images import check_image_tokens, expanded
from conch.engine.loaded_model import LoadedModel
from conch.engine.pipeline.length_bound import at_least_tokens
from conch.engine.types import GenerationRequest

INLINE_CHARS = 2048        # shorter prompts tokenize in well under a millisecond: cheaper than a thread hop


def tokenize(model: LoadedModel, request: GenerationRequest, prompt_param: str = "prompt") -> GenerationRequest:
    """The request with `prompt_token_ids` set and `max_tokens` resolved (None, or past the context's room
    with `max_tokens_ceiling`: the rest of the context).

    Raises InvalidRequest naming `prompt_param` for an empty prompt, ContextLengthExceeded for one that, with
    max_tokens, exceeds the context. A model whose own steps change the text first (Capabilities.text_prompt)
    checks the limits there; an upstream (Capabilities.chat_input) checks its own context, and the ids only
    count the prompt (usage, limits)."""
    ids = request.prompt_token_ids
    caps = model.backend.capabilities
    limited = not (caps.text_prompt or caps.chat_input)
    if ids is None:
        tokenizer, text = model.tokenizer, _text(request)
        if request.images or caps.vision is not None:     # each image's placeholder, as the image's tokens
            text = expanded(text, request.images, caps.vision, model.config.name, prompt_param)
        if limited:
            _refuse_by_bound(tokenizer, text, model.context_length, prompt_param)
        ids = tuple(tokenizer.encode(text, add_special_tokens=request.add_special_tokens))
    if not ids:
        raise InvalidRequest("the prompt is empty", param=prompt_param)
    if request.prompt_token_ids is not None:
        _check_ids(ids, model.vocab_size, prompt_param)
    else:
        check_image_tokens(ids, request.images, caps.vision, prompt_param)
    if not limited:
        return replace(request, prompt_token_ids=ids)
    limit, params = model.context_length, request.params
    if len(ids) >= limit:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {limit} tokens. However, your prompt has "
            f"{len(ids)} tokens. Please reduce the length of the prompt.", param=prompt_param)
    room = limit - len(ids)
    max_tokens = params.max_tokens if params.max_tokens is not None else room
    if request.max_tokens_ceiling and max_tokens > room:
        max_tokens = room
    if max_tokens != params.max_tokens:
        params = replace(params, max_tokens=max_tokens, min_tokens=min(params.min_tokens, max_tokens))
    if len(ids) + max_tokens > limit:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{len(ids) + max_tokens} tokens ({len(ids)} in the prompt, {max_tokens} in the "
            f"completion). Please reduce the prompt or max_tokens.", param=prompt_param)
    return replace(request, prompt_token_ids=ids, params=params)


def _check_ids(ids: tuple[int, ...], vocab_size: int | None, prompt_param: str) -> None:
    """Token ids the client gave must name tokens of the model (none of the checks below reads them)."""
    high = vocab_size if vocab_size is not None else 2**63
    bad = next((i for i in ids if not 0 <= i < high), None)
    if bad is not None:
        where = f" (0..{vocab_size - 1})" if vocab_size is not None else ""
        raise InvalidRequest(f"the prompt's token id {bad} is outside the vocabulary{where}", param=prompt_param)


def _refuse_by_bound(tokenizer, prompt: str, limit: int, prompt_param: str) -> None:
    if len(prompt) < limit:                   # a token spans at least a character: the bound cannot refuse it
        return
    least = at_least_tokens(tokenizer, prompt)
    if least >= limit:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {limit} tokens. However, your prompt has at least "
            f"{least} tokens ({len(prompt)} characters). Please reduce the length of the prompt.", param=prompt_param)


def tokenizes_inline(request: GenerationRequest) -> bool:
    """Whether the step is cheap enough to run on the caller's thread (token ids given, or a short prompt)."""
    return request.prompt_token_ids is not None or len(_text(request)) <= INLINE_CHARS


def _text(request: GenerationRequest) -> str:
    return request.chat.text if request.chat is not None else request.prompt or ""

"""OpenAI's shapes of a finished choice: usage, ids and timestamps, the logprobs of chat and completions."""
from __future__ import annotations

import time
import uuid
from conch.engine.types import PositionLogprobs
from conch.gateway.choices import Choice


def usage(choices: list[Choice], prompt_tokens: int | None = None) -> dict:
    """One prompt is counted once per distinct prompt, completions summed over every choice."""
    prompt = prompt_tokens if prompt_tokens is not None else max((c.prompt_tokens for c in choices), default=0)
    completion = sum(c.completion_tokens for c in choices)
    cached = max((c.cached_tokens for c in choices), default=0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": sum(c.reasoning_tokens for c in choices)}}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())


def chat_logprobs(items: list[PositionLogprobs]) -> dict:
    def entry(t) -> dict:
        return {"token": t.token, "logprob": t.logprob, "bytes": list(t.token.encode("utf-8"))}

    return {"content": [{**entry(p.chosen), "top_logprobs": [entry(t) for t in p.top]} for p in items]}


def echo_logprobs(first_token: str, prompt: tuple[PositionLogprobs, ...], generated: dict) -> dict:
    """The prompt's entries (the first token's logprob null: it has no context) before the generated ones."""
    scored = completion_logprobs(list(prompt), len(first_token))
    return {
        "tokens": [first_token, *scored["tokens"], *generated["tokens"]],
        "token_logprobs": [None, *scored["token_logprobs"], *generated["token_logprobs"]],
        "top_logprobs": [None, *scored["top_logprobs"], *generated["top_logprobs"]],
        "text_offset": [0, *scored["text_offset"], *generated["text_offset"]],
    }


def completion_logprobs(items: list[PositionLogprobs], offset: int = 0) -> dict:
    tokens, offsets, pos = [], [], offset
    for p in items:
        tokens.append(p.chosen.token)
        offsets.append(pos)
        pos += len(p.chosen.token)
    return {
        "tokens": tokens,
        "token_logprobs": [p.chosen.logprob for p in items],
        "top_logprobs": [{t.token: t.logprob for t in p.top} for p in items],
        "text_offset": offsets,
    }

"""TensorRT-LLM's `stop_words` / `bad_words` request parameters for a native LLM (the generate curl of
Triton's docs sends `"bad_words": [""], "stop_words": [""]`).

Each word is a string (or a list of them; an empty one means none). A stop word ends the choice as a stop
string does. A bad word is never generated: one that is a single token is banned through `logit_bias`; a bad
word of several tokens would need a sequence ban the samplers lack, so it is refused by name, not ignored.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.types import SamplingParams

WORD_KEYS = ("stop_words", "bad_words")
BANNED = -100.0          # the bias that removes a token (logit_bias's floor)


def split_words(values: dict[str, Any]) -> tuple[dict[str, tuple[str, ...]], dict[str, Any]]:
    """({stop_words, bad_words} -> their non-empty words, the other values)."""
    words = {key: _words(values[key], key) for key in WORD_KEYS if key in values}
    return words, {k: v for k, v in values.items() if k not in WORD_KEYS}


def apply_words(params: SamplingParams, words: dict[str, tuple[str, ...]], tokenizer: Any) -> SamplingParams:
    stop, bad = words.get("stop_words", ()), words.get("bad_words", ())
    if not stop and not bad:
        return params
    bias = dict(params.logit_bias)
    for word in bad:
        ids = tokenizer.encode(word, add_special_tokens=False)
        if len(ids) != 1:
            raise InvalidRequest(f"bad word {word!r} is {len(ids)} tokens; this model bans single-token bad "
                                 f"words only", param="bad_words")
        bias[ids[0]] = BANNED
    return replace(params, stop=tuple(dict.fromkeys((*params.stop, *stop))), logit_bias=tuple(bias.items()))


def _words(value: Any, key: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(w, str) for w in items):
        raise InvalidRequest(f"'{key}' must be a string or a list of strings", param=key)
    return tuple(w for w in items if w)

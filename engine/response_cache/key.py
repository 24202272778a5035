"""The cache key of a prepared request: everything that changes the output, nothing that identifies a caller.

In: model, version, weights, prompt token ids (after templating: tools and tool_choice are in the prompt and
the grammar), every sampling parameter (n, logprobs included) and the grammar spec.
Out: the request id, the API key, `stream` (a streamed hit replays the same deltas) and `priority`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationRequest

KEY_VERSION = 1     # bump when the key or the value encoding changes


def _plain(value: Any) -> Any:
    """A JSON-able, canonical form of a spec: dataclasses become {type, fields}, tuples lists, sets sorted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__qualname__,
                **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"__repr__": repr(value)}


def cache_key(config: ModelConfig, request: GenerationRequest) -> str:
    identity = {
        "v": KEY_VERSION,
        "model": config.name, "version": request.version or config.version,
        "weights": config.weights, "dtype": config.dtype, "backend": config.backend,
        "prompt": list(request.prompt_token_ids or ()),
        "params": _plain(request.params),
        "grammar": _plain(request.grammar),
    }
    if request.images:                          # the prompt's placeholders say nothing of what they show
        identity["images"] = [image.digest for image in request.images]
    if request.chat is not None:                # an upstream's messages and tools (the ids only count them)
        identity["chat"] = _plain(request.chat)
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
    return f"{config.name}:{hashlib.sha256(blob).hexdigest()}"

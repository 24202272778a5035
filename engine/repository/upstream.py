"""The `openai` backend's keys in a model's config.yaml, parsed into frozen dataclasses.

    backend: openai
    base_url: http://127.0.0.1:9000/v1      # or routes: [{base_url: ..., weight: 2, name: a}, {base_url: ...}]
    upstream_model: smollm2-135m-instruct   # the name the upstream knows (default: this model's name)
    api_key_env: REMOTE_KEY                 # the environment variable holding the key; never the key itself
    timeout: 60                             # seconds to connect, and between two reads of the answer
    max_concurrency: 64                     # requests in flight upstream (the admission queue holds the rest)
    max_retries: 0                          # the openai client's own retries on one deployment
    supports_tools: false                   # forward tools / tool_choice / response_format as they are
    extra_params: false                     # forward vLLM's sampling extensions (top_k, min_p, ...)
    fallbacks: [other-model]                # models tried in order when every deployment failed
    cooldown_failures: 3                    # consecutive failures that cool a deployment down...
    cooldown: 30                            # ...for this many seconds, after which it is tried again
    encoding: o200k_base                    # tiktoken encoding for counting, when no `tokenizer:` is named
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from conch.engine.errors import InvalidRequest

_ENCODINGS = ("o200k_base", "cl100k_base")


@dataclass(frozen=True)
class RouteConfig:
    """One deployment of the upstream model."""

    base_url: str
    weight: float = 1.0
    name: str | None = None          # the `deployment` label in /metrics; defaults to base_url

    @property
    def label(self) -> str:
        return self.name or self.base_url


@dataclass(frozen=True)
class UpstreamConfig:
    routes: tuple[RouteConfig, ...]
    upstream_model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 0
    supports_tools: bool = False
    extra_params: bool = False
    fallbacks: tuple[str, ...] = ()
    cooldown_failures: int = 3
    cooldown: float = 30.0
    encoding: str = "o200k_base"


# Top-level config keys that belong to the upstream (max_concurrency sets the model's max_batch_size).
UPSTREAM_KEYS = frozenset({f.name for f in fields(UpstreamConfig)} | {"base_url"})


def upstream_config(model: str, data: dict[str, Any]) -> UpstreamConfig:
    """The upstream keys of a config mapping (already split off), checked once."""
    data = dict(data)
    routes = _routes(model, data.pop("base_url", None), data.pop("routes", None))
    data.setdefault("upstream_model", model)
    if "fallbacks" in data:
        data["fallbacks"] = tuple(data["fallbacks"] or ())
    try:
        config = UpstreamConfig(routes=routes, **data)
    except TypeError as exc:
        raise InvalidRequest(f"model '{model}': {exc}", param="config") from exc
    if config.encoding not in _ENCODINGS:
        raise InvalidRequest(f"model '{model}': encoding must be one of {list(_ENCODINGS)}", param="config")
    if config.timeout <= 0 or config.max_retries < 0 or config.cooldown_failures < 1 or config.cooldown < 0:
        raise InvalidRequest(f"model '{model}': timeout must be > 0, max_retries >= 0, cooldown_failures "
                             f">= 1 and cooldown >= 0", param="config")
    return config


def _routes(model: str, base_url: str | None, routes: Any) -> tuple[RouteConfig, ...]:
    if (base_url is None) == (routes is None):
        raise InvalidRequest(f"model '{model}': an openai backend needs exactly one of base_url or routes",
                             param="config")
    if base_url is not None:
        return (RouteConfig(str(base_url)),)
    if not isinstance(routes, list) or not routes:
        raise InvalidRequest(f"model '{model}': routes must be a non-empty list", param="config")
    out = []
    for i, route in enumerate(routes):
        try:
            out.append(RouteConfig(**route))
        except TypeError as exc:
            raise InvalidRequest(f"model '{model}': routes[{i}]: {exc}", param="config") from exc
        if out[-1].weight <= 0:
            raise InvalidRequest(f"model '{model}': routes[{i}].weight must be > 0", param="config")
    labels = [r.label for r in out]
    if len(set(labels)) != len(labels):
        raise InvalidRequest(f"model '{model}': two routes share the name {labels}", param="config")
    return tuple(out)

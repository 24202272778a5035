"""/v1/completions request."""
from __future__ import annotations

from typing import Any, cast

from pydantic import field_validator, model_validator

from conch.gateway.errors import ParamError
from conch.gateway.openai.schemas.common import SamplingFields


class CompletionRequest(SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = 16   # 0: score the echoed prompt only
    logprobs: int | None = None
    echo: bool = False
    best_of: int | None = None
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("prompt must not be an empty list")
        return value

    @field_validator("best_of")
    @classmethod
    def _best_of(cls, value: int | None, info: Any) -> int | None:
        if value is not None and value != info.data.get("n", 1):
            raise ValueError("best_of other than n is not supported")
        return value

    @model_validator(mode="before")
    @classmethod
    def _scoring(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("max_tokens") == 0 and not data.get("echo"):
            raise ParamError("max_tokens", "max_tokens 0 is only allowed with echo (to score the prompt)")
        return data

    def route_sampling(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "logprobs": self.logprobs, "prompt_logprobs": self.prompt_logprobs}

    @property
    def prompt_logprobs(self) -> int | None:
        """What the engine must score of the prompt: echo with logprobs returns them, max_tokens 0 needs them."""
        if self.echo and (self.logprobs is not None or self.max_tokens == 0):
            return self.logprobs or 0
        return None

    def prompts(self) -> list[str | list[int]]:
        """One entry per prompt: text, or token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(cast("list[int]", p))]                 # all() does not narrow the union
        return list(cast("list[str] | list[list[int]]", p))

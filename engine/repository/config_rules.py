"""The type and range of every scalar config key, checked when a config is read (config.yaml, config.pbtxt's
`parameters`, a load's override), so a bad value refuses the load with a 400 naming the key and the version
already serving keeps serving. Nothing below reads a config value it has not passed here: a `max_batch_size`
of "x" or 0 would otherwise load and then fail or stall every request on the engine thread.

Values may arrive as text (Triton's `parameters` are strings): a rule reads "8" as 8 and "true" as True, and
refuses "x" naming the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from conch.engine.errors import InvalidRequest

_TYPE_NAMES = {int: "an integer", float: "a number", bool: "a boolean", str: "a string"}


@dataclass(frozen=True)
class Rule:
    kind: type                       # int, float, bool or str
    low: float | None = None         # the least value (inclusive unless low_open)
    low_open: bool = False
    high: float | None = None        # the greatest value (inclusive)
    optional: bool = False           # None (the default: off, or from elsewhere) is allowed

    def read(self, value: Any) -> Any:
        """The value as the rule's type; ValueError with the reason if it is not one, or out of range."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("must be given")
        out: Any = _READ[self.kind](value)
        if self.low is not None and (out <= self.low if self.low_open else out < self.low):
            raise ValueError(f"must be {'above' if self.low_open else 'at least'} {self.low:g}")
        if self.high is not None and out > self.high:
            raise ValueError(f"must be at most {self.high:g}")
        return out

    def describe(self) -> str:
        what = _TYPE_NAMES[self.kind]
        if self.low is not None:
            what += f" {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            what += f"{' and' if self.low is not None else ''} <= {self.high:g}"
        return what + (" (or null)" if self.optional else "")


def _int(value: Any) -> int:
    if isinstance(value, str):
        value = value.strip()
        return int(value) if value.lstrip("-").isdigit() and len(value) <= 18 else _int(float(value))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not an integer")
    return int(value)


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("not a number")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError("not a finite number")
    return out


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("not a boolean")


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


_READ = {int: _int, float: _float, bool: _bool, str: _str}

RULES: dict[str, Rule] = {
    "backend": Rule(str), "weights": Rule(str, optional=True), "tokenizer": Rule(str, optional=True),
    "chat_template": Rule(str, optional=True), "tool_call_parser": Rule(str), "dtype": Rule(str),
    "version": Rule(str), "path": Rule(str, optional=True),
    "max_parallel_tool_calls": Rule(int, 1),
    "max_batch_size": Rule(int, 1),           # Triton's 0 (no batching) never reaches here: pbtxt.py skips it
    "context_length": Rule(int, 1),
    "max_queue_size": Rule(int, 0),           # 0: unbounded, as in Triton
    "prefix_cache_mb": Rule(int, 0),          # 0: off
    "kv_cache_mb": Rule(int, 1),
    "max_step_tokens": Rule(int, 1),
    "prefill_stall": Rule(float, 0),          # 0 (no bound) or >= 1: ModelConfig checks the gap
    "queue_timeout": Rule(float, 0, low_open=True, optional=True),
    "response_cache": Rule(bool), "decoupled": Rule(bool), "batch_invariant": Rule(bool),
    "speculative_tokens": Rule(int, 0, high=16),   # 0: off; a verify span is 1 + this many tokens
    "prompt_lookup_min": Rule(int, 1, high=16), "prompt_lookup_max": Rule(int, 1, high=16),
    "speculative_grammar": Rule(bool), "speculative_max_batch": Rule(int, 1),
    "num_threads": Rule(int, 1, optional=True),
    "runner": Rule(str), "kv_store": Rule(str),   # their values: config.py's RUNNERS and KV_STORES
}


def checked(model: str, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with every key that has a rule read as its type; InvalidRequest naming the first bad key."""
    out = dict(values)
    for key, rule in RULES.items():
        if key not in values:
            continue
        try:
            out[key] = rule.read(values[key])
        except (ValueError, OverflowError) as exc:
            raise InvalidRequest(f"model '{model}': config key '{key}' must be {rule.describe()}, got "
                                 f"{_short(values[key])}{_why(exc)}", param=key) from None
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _why(exc: Exception) -> str:
    """A range failure's reason; a value of the wrong type needs none beyond the rule."""
    return f" ({exc})" if str(exc).startswith("must") else ""

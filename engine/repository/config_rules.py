"""The type and range of every scalar config key, checked when a config is read (config.yaml, config.pbtxt's
`parameters`, a load's override), so a bad value refuses the load with a 400 naming the key and the version
already serving keeps serving. Nothing below reads a config value it has not passed here: a `max_batch_size`
of "x" or 0 would otherwise load and then fail or stall every request on the engine thread.

Each rule is declared once, on its `ModelConfig` field (config.py's `key(default, Rule(...), sources)`).
Values may arrive as text (Triton's `parameters` are strings): a rule reads "8" as 8 and "true" as True, and
refuses "x" naming the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
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

# Where a key may be written. A config key is one `ModelConfig` field declared with `key()` (config.py), which
# names its rule and its sources; the rules, the keys a config.yaml may write and the `parameters` entries
# config.pbtxt reads all derive from those fields, so a key is declared once.
YAML = "yaml"               # config.yaml
PARAMETERS = "parameters"   # a config.pbtxt `parameters { key: ... }` entry (text, read by the key's rule)
TRITON = "triton"           # a config.pbtxt key of Triton's own (max_batch_size, instance_group, input...)
OVERRIDE = "override"       # a load's config override in Conch's keys (Triton's message as JSON reads as pbtxt)
SETTING = (YAML, PARAMETERS, OVERRIDE)     # a Conch setting: written in any of them
YAML_ONLY = (YAML, OVERRIDE)               # structured, or a key config.pbtxt spells its own way (TRITON)


def key(default: Any = None, rule: Rule | None = None, sources: tuple[str, ...] = SETTING, **options: Any) -> Any:
    """A config key: a dataclass field whose metadata holds its rule (None: a structured value its own reader
    checks) and the sources it may be written in."""
    metadata = {"rule": rule, "sources": frozenset(sources)}
    if "default_factory" in options:
        return field(metadata=metadata, **options)
    return field(default=default, metadata=metadata, **options)


def rules_of(cls: type) -> dict[str, Rule]:
    return {f.name: f.metadata["rule"] for f in fields(cls) if f.metadata.get("rule") is not None}


def keys_from(cls: type, source: str) -> frozenset[str]:
    """The keys that may be written in `source`."""
    return frozenset(f.name for f in fields(cls) if source in f.metadata.get("sources", ()))


def checked(model: str, values: dict[str, Any], rules: dict[str, Rule]) -> dict[str, Any]:
    """`values` with every key that has a rule read as its type; InvalidRequest naming the first bad key."""
    out = dict(values)
    for name, rule in rules.items():
        if name not in values:
            continue
        try:
            out[name] = rule.read(values[name])
        except (ValueError, OverflowError) as exc:
            raise InvalidRequest(f"model '{model}': config key '{name}' must be {rule.describe()}, got "
                                 f"{_short(values[name])}{_why(exc)}", param=name) from None
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _why(exc: Exception) -> str:
    """A range failure's reason; a value of the wrong type needs none beyond the rule."""
    return f" ({exc})" if str(exc).startswith("must") else ""

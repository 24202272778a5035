"""Readers of one wire value into the type a parameter table row names.

A face may carry any value as text (Triton's `parameters` and `sampling_parameters` JSON, gRPC's
string_param), so every reader takes the value itself or its text. Booleans are no numbers here (a JSON
`true` for a temperature is a client's mistake). A reader raises ValueError or TypeError; the builder turns
that into an InvalidRequest naming the parameter.
"""
from __future__ import annotations

from typing import Any, Callable

from conch.engine.params.json_text import loads


def read_int(value: Any) -> int:
    if isinstance(value, str):
        value = _int_or_float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    if isinstance(value, float) and not value.is_integer():       # inf and nan are not integers either
        raise ValueError(value)
    return int(value)


def _int_or_float(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)                        # "1.0" and "1e3" are integers too; "1.5" is caught by the caller


def read_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    return float(value)


def read_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(value)


def _items(value: Any, scalar: tuple[type, ...]) -> list:
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = loads(value)
    if isinstance(value, scalar) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(value)
    return list(value)


def read_strings(value: Any) -> tuple[str, ...]:
    items = _items(value, (str,))
    if not all(isinstance(v, str) for v in items):
        raise TypeError(value)
    return tuple(items)


def read_ints(value: Any) -> tuple[int, ...]:
    return tuple(read_int(v) for v in _items(value, (int, str)))


def read_bias(value: Any) -> tuple[tuple[int, float], ...]:
    """{"token id": bias} (JSON object keys are text) -> sorted (id, bias) pairs."""
    if isinstance(value, str):
        value = loads(value)
    if not isinstance(value, dict):
        raise TypeError(value)
    out = []
    for key, bias in value.items():
        if isinstance(key, str) and not key.strip().lstrip("-").isdigit():
            raise ValueError(f"key '{key}' is not a token id")
        out.append((read_int(key), read_float(bias)))
    return tuple(sorted(out))


def short_repr(value: Any, limit: int = 60) -> str:
    """The value as the client wrote it, cut short: a refusal never echoes a megabyte back."""
    try:
        text = repr(value)
    except ValueError:                            # an int past Python's 4,300-digit limit has no repr
        return "a number of more than 4300 digits"
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


READERS: dict[str, Callable[[Any], Any]] = {"int": read_int, "float": read_float, "bool": read_bool,
                                            "strings": read_strings, "ints": read_ints, "bias": read_bias}
TYPE_NAMES = {"int": "an integer", "float": "a number", "bool": "a boolean", "strings": "a string or a list of strings",
              "ints": "an integer or a list of integers", "bias": "an object of token id -> bias"}

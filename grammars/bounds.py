"""How long a generated JSON value may grow where its schema sets no limit (configurable per model).

JSON Schema lets a string, an array or a number grow without end, and a small model, once in a loop,
does: it repeats digits or words until `max_tokens`. For generation only, each unbounded place gets
the limit below; every output is still valid under the user's schema, as the limits only narrow it.
`None` turns a limit off. A model's config may override any of them (`grammar_bounds:` in
config.yaml); docs/structured-outputs.md lists the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True)
class GenerationBounds:
    max_string_length: int | None = 256   # characters, for a string with no maxLength/enum/const/pattern/format
    max_items: int | None = 16            # items, for an array with no maxItems
    max_extra_keys: int | None = 16       # undeclared keys per open object (json_keys.py; maxProperties)
    max_ref_depth: int | None = 8         # times a recursive $ref is followed (grammars/recursion.py)
    max_integer_digits: int | None = 15   # digits of a number's integer part where it has no minimum/maximum
    max_fraction_digits: int | None = 6   # digits after the point of a `number` with no multipleOf
    close_objects: bool = True            # an object with `properties` and no additionalProperties is closed

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "close_objects":
                if not isinstance(value, bool):
                    raise ValueError("grammar bound 'close_objects' must be true or false")
            elif value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"grammar bound {item.name!r} must be a positive integer or null, not {value!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> "GenerationBounds":
        """From a model config's `grammar_bounds` mapping; ValueError names an unknown key or a bad value."""
        data = dict(data or {})
        unknown = sorted(set(data) - {item.name for item in fields(cls)})
        if unknown:
            raise ValueError(f"unknown grammar bounds {unknown}; known: {[item.name for item in fields(cls)]}")
        return cls(**data)


DEFAULT_BOUNDS = GenerationBounds()

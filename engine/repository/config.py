"""A model's configuration, parsed once from `config.yaml` into a frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from engine.errors import InvalidRequest


@dataclass(frozen=True)
class ModelConfig:
    name: str
    backend: str = "transformers"
    weights: str | None = None          # a folder; relative paths are resolved against the version folder
    tokenizer: str | None = None        # defaults to the weights folder
    chat_template: str | None = None    # a Jinja template overriding the tokenizer's own
    tool_call_parser: str = "hermes"
    max_batch_size: int = 16
    context_length: int = 2048
    dtype: str = "bfloat16"
    max_queue_size: int = 256
    response_cache: bool = True
    num_threads: int | None = None
    version: str = "1"
    path: str | None = None             # the model's folder in the repository
    parameters: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_mapping(cls, name: str, data: dict[str, Any], **extra: Any) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidRequest(f"model '{name}': unknown config keys {unknown}", param="config")
        merged = {**data, **extra, "name": name}
        return cls(**merged)

    @classmethod
    def from_yaml(cls, file: Path, name: str, **extra: Any) -> "ModelConfig":
        data = yaml.safe_load(file.read_text()) or {}
        if not isinstance(data, dict):
            raise InvalidRequest(f"model '{name}': {file} is not a mapping", param="config")
        return cls.from_mapping(name, data, **extra)

    def resolve(self, value: str | None) -> str | None:
        """A path from the config, made absolute against the version folder."""
        if value is None or value.startswith("builtin:") or self.path is None:
            return value
        p = Path(value)
        return str(p if p.is_absolute() else Path(self.path) / self.version / p)

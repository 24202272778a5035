"""A model's configuration, parsed once from `config.yaml` (or `config.pbtxt`) into a frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from engine.errors import InvalidRequest
from grammars import GenerationBounds
from engine.repository.specs import EnsembleStep, TensorSpec, VersionPolicy, tensor_specs

# Backends that serve Triton's LLM tensor contract (text_input -> text_output) rather than declared tensors.
LLM_BACKENDS = frozenset({"transformers", "vllm", "tensorrt_llm", "openai"})


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
    prefix_cache_mb: int = 256          # KV of long prompt heads kept for reuse (0 = off)
    queue_timeout: float | None = None  # seconds a request may wait for a slot; None = no limit
    response_cache: bool = True
    grammar_bounds: GenerationBounds = GenerationBounds()  # how far unbounded JSON may grow (grammars/bounds.py)
    num_threads: int | None = None
    version: str = "1"
    path: str | None = None             # the model's folder in the repository
    parameters: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    inputs: tuple[TensorSpec, ...] = ()     # declared tensors (python, ensemble); an LLM has the contract
    outputs: tuple[TensorSpec, ...] = ()
    steps: tuple[EnsembleStep, ...] = ()    # an ensemble's DAG
    version_policy: VersionPolicy = VersionPolicy()
    decoupled: bool = False
    triton: Any = field(default=None, hash=False, compare=False, repr=False)  # the parsed config.pbtxt

    @property
    def is_llm(self) -> bool:
        return self.backend in LLM_BACKENDS

    @classmethod
    def from_mapping(cls, name: str, data: dict[str, Any], **extra: Any) -> "ModelConfig":
        known = {f.name for f in fields(cls)} - {"triton"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidRequest(f"model '{name}': unknown config keys {unknown}", param="config")
        data = dict(data)
        for key in ("inputs", "outputs"):
            if key in data:
                data[key] = tensor_specs(data[key])
        if "steps" in data:
            data["steps"] = tuple(EnsembleStep.from_mapping(s) for s in data["steps"] or ())
        if "grammar_bounds" in data and not isinstance(data["grammar_bounds"], GenerationBounds):
            try:
                data["grammar_bounds"] = GenerationBounds.from_mapping(data["grammar_bounds"])
            except (TypeError, ValueError) as exc:
                raise InvalidRequest(f"model '{name}': {exc}", param="config") from exc
        if "version_policy" in data and not isinstance(data["version_policy"], VersionPolicy):
            data["version_policy"] = VersionPolicy.from_mapping(data["version_policy"])
        merged = {**data, **extra, "name": name}
        try:
            return cls(**merged)
        except TypeError as exc:
            raise InvalidRequest(f"model '{name}': {exc}", param="config") from exc

    @classmethod
    def from_yaml(cls, file: Path, name: str, **extra: Any) -> "ModelConfig":
        try:
            data = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise InvalidRequest(f"model '{name}': {file} is not valid YAML: {exc}", param="config") from exc
        if not isinstance(data, dict):
            raise InvalidRequest(f"model '{name}': {file} is not a mapping", param="config")
        return cls.from_mapping(name, data, **extra)

    def resolve(self, value: str | None) -> str | None:
        """A path from the config, made absolute against the version folder."""
        if value is None or value.startswith("builtin:") or self.path is None:
            return value
        p = Path(value)
        return str(p if p.is_absolute() else Path(self.path) / self.version / p)

    @property
    def version_dir(self) -> Path | None:
        return Path(self.path) / self.version if self.path is not None else None

"""A model's configuration, parsed once from `config.yaml` (or `config.pbtxt`) into a frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, overload

import yaml

from conch.engine.errors import InvalidRequest
from conch.engine.repository.batching import DynamicBatching
from conch.engine.repository.config_rules import RULES, checked
from conch.grammars import GenerationBounds
from conch.engine.repository.sequence import SequenceBatching
from conch.engine.repository.specs import EnsembleStep, TensorSpec, VersionPolicy, tensor_specs
from conch.engine.repository.triton_keys import RateLimit, check_instances
from conch.engine.repository.upstream import UPSTREAM_KEYS, UpstreamConfig, upstream_config
from conch.engine.repository.warmup import WarmupSample, warmup_samples

# The transformers backend's runners (engine/backends/transformers/): "auto" is Conch's flattened forward for
# the Llama family and the HF forward for any other architecture; "hf" is the HF forward always.
RUNNERS = ("auto", "hf")
# Its slot KV store's memory policy (slot_store.py's StorePolicy): "auto" is "reserved" where the native decode
# kernel serves the model (bfloat16), else "zeroed"; "reserved" is refused at load where that kernel does not.
KV_STORES = ("auto", "reserved", "zeroed")

# Checks of the keys a layer above owns (agents: `tool_call_parser`, its tool-format registry), each returning
# what is wrong or None; added when that layer is imported, so that the engine, which imports nothing above
# it, still refuses such a config when it loads rather than on each request.
_CHECKS: list[Callable[[ModelConfig], str | None]] = []


def add_config_check(check: Callable[[ModelConfig], str | None]) -> None:
    if check not in _CHECKS:
        _CHECKS.append(check)


# Backends that serve Triton's LLM tensor contract (text_input -> text_output) rather than declared tensors.
LLM_BACKENDS = frozenset({"transformers", "vllm", "tensorrt_llm", "openai"})


@dataclass(frozen=True)
class ModelConfig:
    name: str
    backend: str = "transformers"
    weights: str | None = None          # a folder or a .gguf file; relative paths are resolved against the
                                        # version folder
    tokenizer: str | None = None        # defaults to the weights folder
    chat_template: str | None = None    # a Jinja template overriding the tokenizer's own
    tool_call_parser: str = "hermes"
    max_parallel_tool_calls: int = 4    # most calls one forced (tool_choice "required") answer may hold
    max_batch_size: int = 64
    context_length: int = 2048
    dtype: str = "bfloat16"
    max_queue_size: int = 256
    prefix_cache_mb: int = 256          # KV of long prompt heads kept for reuse (0 = off, and freed KV slots
                                        # keep no tokens for a next turn: slot_store.py)
    kv_cache_mb: int = 2048             # the running sequences' KV budget (transformers, Llama family)
    runner: str = "auto"                # one of RUNNERS (the transformers backend)
    kv_store: str = "auto"              # one of KV_STORES (the transformers backend, Llama family)
    max_step_tokens: int = 2048         # tokens one engine step computes: decode rows + prefill chunks
                                        # (vLLM-CPU's API-server default: a 64-chat burst's TTFT p50 1.6-1.7 s
                                        # against 1.8-1.9 s at 1024)
    batch_invariant: bool = False       # insist on greedy tokens the same whatever the batch and the caches
                                        # (the default already is where the native kernels serve: llama.py)
    prefill_stall: float = 2.0          # while rows decode, a prefilling step may take this many decode-only
                                        # steps' time (stall_budget.py); 0 = no bound (throughput first)
    speculative_tokens: int = 4         # multi-token decode steps (transformers, Llama family): most tokens a
                                        # sequence proposes a step (0 = off); engine/backends/transformers/speculation
    prompt_lookup_min: int = 2          # the shortest and longest suffix the prompt lookup proposes from
    prompt_lookup_max: int = 4
    speculative_grammar: bool = True    # propose the tokens a request's grammar forces
    speculative_max_batch: int = 4      # no proposals in a step where more sequences decode
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
    upstream: UpstreamConfig | None = None  # the openai backend's deployments (engine/repository/upstream.py)
    dynamic_batching: DynamicBatching | None = None   # Triton's dynamic batcher (non-LLM models); None: off
    instance_count: int = 1             # instances run at once (instance_group; python/embedding/text only)
    model_warmup: tuple[WarmupSample, ...] = ()       # run at load, before the model is ready (warmup.py)
    sequence_batching: SequenceBatching | None = None  # python models; from config.pbtxt only (sequence.py)
    rate_limiter: RateLimit | None = None   # python models' instance_group rate_limiter (engine/resources.py)
    triton: Any = field(default=None, hash=False, compare=False, repr=False)  # the parsed config.pbtxt

    def __post_init__(self) -> None:
        given = {key: getattr(self, key) for key in RULES}
        for key, value in checked(self.name, given).items():
            if value is not given[key]:                        # "8" read as 8: the config holds its type
                object.__setattr__(self, key, value)
        if not (self.prefill_stall == 0 or self.prefill_stall >= 1):
            raise InvalidRequest(f"model '{self.name}': config key 'prefill_stall' must be 0 (no bound) or a "
                                 f"number >= 1", param="prefill_stall")
        check_instances(self.instance_count, self.backend, self.name)
        if self.batch_invariant and self.backend != "transformers":
            raise InvalidRequest(f"model '{self.name}': config key 'batch_invariant' is the transformers backend's "
                                 f"(vLLM's own switch: VLLM_BATCH_INVARIANT=1)", param="batch_invariant")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise InvalidRequest(f"model '{self.name}': config key 'prompt_lookup_min' ({self.prompt_lookup_min}) "
                                 f"must not exceed 'prompt_lookup_max' ({self.prompt_lookup_max})",
                                 param="prompt_lookup_min")
        for key, allowed in (("runner", RUNNERS), ("kv_store", KV_STORES)):
            if getattr(self, key) not in allowed:
                raise InvalidRequest(f"model '{self.name}': config key '{key}' must be one of {', '.join(allowed)}, "
                                     f"not {getattr(self, key)!r}", param=key)
        for check in _CHECKS:
            problem = check(self)
            if problem is not None:
                raise InvalidRequest(f"model '{self.name}': {problem}", param="config")

    @property
    def is_llm(self) -> bool:
        return self.backend in LLM_BACKENDS

    @classmethod
    def from_mapping(cls, name: str, data: dict[str, Any], **extra: Any) -> "ModelConfig":
        known = {f.name for f in fields(cls)} - {"triton", "upstream"}
        if data.get("backend") == "openai":
            known |= UPSTREAM_KEYS | {"max_concurrency"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidRequest(f"model '{name}': unknown config keys {unknown}", param="config")
        data = _split_upstream(name, dict(data))
        for key in ("inputs", "outputs"):
            if key in data:
                data[key] = tensor_specs(data[key])
        if "steps" in data:
            data["steps"] = tuple(EnsembleStep.from_mapping(s) for s in data["steps"] or ())
        if data.get("dynamic_batching") is not None and not isinstance(data["dynamic_batching"], DynamicBatching):
            data["dynamic_batching"] = DynamicBatching.from_mapping(data["dynamic_batching"])
        for key in ("sequence_batching", "rate_limiter"):
            if data.get(key) is not None:
                raise InvalidRequest(f"model '{name}': {key} is read from config.pbtxt only", param=key)
        if data.get("model_warmup") and not isinstance(data["model_warmup"], tuple):
            data["model_warmup"] = warmup_samples(data["model_warmup"], name)
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

    @overload
    def resolve(self, value: str) -> str: ...

    @overload
    def resolve(self, value: None) -> None: ...

    def resolve(self, value: str | None) -> str | None:
        """A path from the config, made absolute against the version folder."""
        if value is None or value.startswith("builtin:") or self.path is None:
            return value
        p = Path(value)
        return str(p if p.is_absolute() else Path(self.path) / self.version / p)

    @property
    def version_dir(self) -> Path | None:
        return Path(self.path) / self.version if self.path is not None else None


def _split_upstream(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """An openai backend's top-level upstream keys, gathered into `upstream`; `max_concurrency` (default 64)
    is its `max_batch_size`: the requests in flight upstream, the admission queue holding the rest."""
    if data.get("backend") != "openai":
        return data
    data["upstream"] = upstream_config(name, {k: data.pop(k) for k in list(data) if k in UPSTREAM_KEYS})
    concurrency = data.pop("max_concurrency", None)
    if concurrency is not None or "max_batch_size" not in data:
        data["max_batch_size"] = concurrency if concurrency is not None else 64     # its rule checks it
    return data


def confine_override(config: ModelConfig, root: Path) -> ModelConfig:
    """A config given on load may read only what the repository holds: its `weights` and `tokenizer` are the
    server's built-in weights (`builtin:NAME`) or folders inside `root` (after resolving links), named without
    `..`. A hub id, an absolute path elsewhere, or a file is refused, and the refusal never echoes a path."""
    for key in ("weights", "tokenizer"):
        value = getattr(config, key)
        if value is None or value.startswith("builtin:"):
            continue
        target = Path(config.resolve(value)).resolve()
        readable = target.is_dir() or (key == "weights" and target.suffix.lower() == ".gguf" and target.is_file())
        if ".." in Path(value).parts or not target.is_relative_to(Path(root).resolve()) or not readable:
            raise InvalidRequest(f"model '{config.name}': a config override's '{key}' must be a folder (or, for "
                                 f"weights, a .gguf file) inside the model repository or 'builtin:NAME'",
                                 param="config")
    return config

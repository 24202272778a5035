"""The engine -> backend contract and the registry of backends by name (imported lazily)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable, Protocol, runtime_checkable

from engine.errors import BackendUnavailable

if TYPE_CHECKING:
    from engine.repository.config import ModelConfig
    from engine.types import GenerationDelta, GenerationRequest


@dataclass(frozen=True)
class Capabilities:
    grammar: bool = False
    logprobs: bool = False
    prompt_logprobs: bool = False   # honours SamplingParams.prompt_logprobs (and max_tokens 0: score only)
    n: bool = False
    seed: bool = False
    embeddings: bool = False
    max_top_logprobs: int = 20
    text_prompt: bool = False   # takes the prompt as text and tokenizes it later itself (an ensemble whose
                                # first steps transform the text): Engine.prepare leaves the limits to that step
    text_output: bool = False   # its deltas carry text, stop strings applied (it detokenizes itself, as vLLM
                                # does); otherwise they carry token ids and the pipeline's detokenize step runs
    chat_input: bool = False    # takes a chat request's messages (GenerationRequest.chat), not a rendered prompt;
                                # its server checks the context, so tokenize only counts
    native_tools: bool = False  # with chat_input: tools, tool_choice and response_format are forwarded as given


@dataclass(frozen=True)
class BackendStats:
    running: int = 0                 # sequences in the running batch
    waiting: int = 0                 # admitted but not yet scheduled
    kv_cache_usage: float | None = None   # fraction 0..1 of the KV budget in use; None if unknown
    prefix_cache_queries: int = 0    # cumulative tokens looked up in the prefix cache
    prefix_cache_hits: int = 0       # cumulative tokens found there


@runtime_checkable
class Backend(Protocol):
    """What every backend offers. Everything beyond these few members is a capability flag."""

    capabilities: Capabilities
    tokenizer: object           # a transformers tokenizer (encode/decode/apply_chat_template)
    context_length: int

    async def start(self) -> None: ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]: ...

    async def abort(self, request_id: str, index: int | None = None) -> None:
        """Stop one choice of a request, or (index None) all of them; each still ends with a final delta."""

    def health(self) -> bool: ...

    async def stop(self) -> None: ...


BackendFactory = Callable[["ModelConfig"], Backend]

# name -> "module:attribute"; the module is imported only when a model names the backend.
_BACKENDS: dict[str, str] = {
    "transformers": "engine.backends.transformers.backend:TransformersBackend",
    "python": "engine.backends.python.backend:PythonBackend",
    "openai": "engine.backends.openai.backend:OpenAIBackend",
    "embedding": "engine.backends.embedding.backend:EmbeddingBackend",
    "vllm": "engine.backends.vllm.backend:VLLMBackend",
    "ensemble": "engine.ensemble.backend:EnsembleBackend",
    "tokenizer": "engine.ensemble.text:TokenizerBackend",
    "detokenizer": "engine.ensemble.text:DetokenizerBackend",
}


def register_backend(name: str, target: str) -> None:
    _BACKENDS[name] = target


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def load_backend_class(name: str) -> BackendFactory:
    target = _BACKENDS.get(name)
    if target is None:
        raise BackendUnavailable(
            f"backend '{name}' is not available; known backends: {', '.join(backend_names())}"
        )
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"backend '{name}' could not be imported: {exc}") from exc
    return getattr(module, attr)

"""The engine -> backend contract and the registry of backends by name (imported lazily)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncGenerator, Callable, Protocol, runtime_checkable

from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.images import VisionSpec

if TYPE_CHECKING:
    from conch.engine.params.model_defaults import GenerationDefaults
    from conch.engine.tensors.interface import InferRequest, Tensors
    from conch.engine.repository.config import ModelConfig
    from conch.engine.repository.specs import TensorSpec
    from conch.engine.types import GenerationDelta, GenerationRequest


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
    speculation: bool = False   # honours SamplingParams.speculative_tokens (Engine.prepare refuses it elsewhere)
    vision: VisionSpec | None = None   # takes GenerationRequest.images at its placeholders (engine/images.py)


@dataclass(frozen=True)
class BackendStats:
    running: int = 0                 # sequences in the running batch
    waiting: int = 0                 # admitted but not yet scheduled
    kv_cache_usage: float | None = None   # fraction 0..1 of the KV budget in use; None if unknown
    prefix_cache_queries: int = 0    # cumulative tokens looked up in the prefix cache
    prefix_cache_hits: int = 0       # cumulative tokens found there
    spec_proposed_tokens: int = 0    # cumulative tokens proposed to multi-token decode steps (speculation)
    spec_accepted_tokens: int = 0    # cumulative proposed tokens the steps' sampling kept


@runtime_checkable
class Backend(Protocol):
    """What every backend offers, whatever its role. Everything beyond these members is a role (below) or a
    capability flag. `stats` is read at every /metrics scrape from the event loop: cheap, no locks held long."""

    capabilities: Capabilities
    tokenizer: object           # a transformers tokenizer (encode/decode/apply_chat_template), or None
    context_length: int

    async def start(self) -> None: ...

    def health(self) -> bool: ...

    def stats(self) -> BackendStats: ...

    async def stop(self) -> None: ...


@runtime_checkable
class TextGenerator(Protocol):
    """The LLM role: token (or text, with Capabilities.text_output) deltas for a GenerationRequest."""

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Every choice's deltas, interleaved; each choice ends with exactly one finished delta."""
        ...

    async def abort(self, request_id: str, index: int | None = None) -> None:
        """Stop one choice of a request, or (index None) all of them; each still ends with a final delta."""


class LLMBackend(Backend, TextGenerator, Protocol):
    """A backend in the LLM role (transformers, vllm, tensorrt_llm, openai): what the pipeline drives and
    the conformance suite (tests/engine/backends/conformance/) checks. Test the role with TextGenerator."""


@runtime_checkable
class TensorModel(Protocol):
    """The named-tensor role (/v2 infer, gRPC, ensemble steps): `inputs`/`outputs` declare the tensors."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]: ...


@runtime_checkable
class CountsExecutions(Protocol):
    """A backend that counts its batched executions (Triton's nv_inference_exec_count); others report one
    execution per request."""

    @property
    def steps(self) -> int: ...


@runtime_checkable
class HasGenerationDefaults(Protocol):
    """A backend whose model carries its own sampling defaults (generation_config.json, GGUF metadata), which
    Engine.prepare gives the fields a request left out (engine/params/model_defaults.py)."""

    generation_defaults: GenerationDefaults


@runtime_checkable
class CompletesConfig(Protocol):
    """A backend whose model completes its own config at start (a python model's `auto_complete_config`):
    the engine serves `completed_config` from then on."""

    completed_config: ModelConfig


@runtime_checkable
class Deployments(Protocol):
    """A backend that spreads requests over upstream deployments (the openai backend), for /metrics."""

    def deployments(self) -> list[tuple[str, bool, int]]:
        """(deployment label, healthy, requests in flight) of each deployment."""
        ...


BackendFactory = Callable[["ModelConfig"], Backend]

# name -> "module:attribute"; the module is imported only when a model names the backend.
_BACKENDS: dict[str, str] = {
    "conch": "conch.engine.backends.conch.backend:ConchBackend",
    "python": "conch.engine.backends.python.backend:PythonBackend",
    "openai": "conch.engine.backends.openai.backend:OpenAIBackend",
    "embedding": "conch.engine.backends.embedding.backend:EmbeddingBackend",
    "ensemble": "conch.engine.backends.ensemble.backend:EnsembleBackend",
    "tokenizer": "conch.engine.backends.text.backend:TokenizerBackend",
    "detokenizer": "conch.engine.backends.text.backend:DetokenizerBackend",
    "vllm": "conch.engine.backends.vllm.backend:VLLMBackend",
    "tensorrt_llm": "conch.engine.backends.tensorrt_llm.backend:TensorRTLLMBackend",
}


def register_backend(name: str, target: str) -> None:
    _BACKENDS[name] = target


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def load_backend_class(name: str) -> BackendFactory:
    target = _BACKENDS.get(name)
    if target is None:                        # the config's mistake (400); a backend not installed is a 503
        raise InvalidRequest(f"backend '{name}' does not exist; known backends: {', '.join(backend_names())}",
                             param="backend")
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"backend '{name}' could not be imported: {exc}") from exc
    return getattr(module, attr)

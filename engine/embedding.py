"""Embeddings: the engine's entry point beside `Engine.generate`, with the same trace and observers (metrics,
token limits) as a generation. Inputs are validated by the model's backend before anything is queued."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from conch.engine.admission import Trace
from conch.engine.engine import Engine, tracked
from conch.engine.errors import InvalidRequest
from conch.engine.pipeline.tokenize import INLINE_CHARS
from conch.engine.types import GenerationRequest


@dataclass(frozen=True)
class EmbeddingRequest:
    """Exactly one of `texts` / `token_ids` is set; token ids exclude the model's special tokens."""

    id: str
    model: str
    texts: tuple[str, ...] | None = None
    token_ids: tuple[tuple[int, ...], ...] | None = None
    dimensions: int | None = None
    priority: int = 0
    timeout: float | None = None     # seconds in the batcher's queue (the queue policy may override)
    version: str | None = None


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray              # (len(inputs), dimensions) float32, L2-normalized
    prompt_tokens: int               # tokens the model read, special tokens included


def embedding_backend(engine: Engine, model: str, version: str | None = None):
    loaded = engine.get(model, version)
    if not loaded.backend.capabilities.embeddings:
        raise InvalidRequest(f"model '{model}' does not produce embeddings", param="model")
    return loaded


async def embed(engine: Engine, request: EmbeddingRequest) -> EmbeddingResult:
    model = embedding_backend(engine, request.model, request.version)
    backend = model.backend
    if request.texts is not None:      # tokenizing a large input is slow: off the event loop, as for prompts
        inline = sum(map(len, request.texts)) <= INLINE_CHARS
        rows = backend.rows_from_texts(request.texts) if inline else await asyncio.to_thread(
            backend.rows_from_texts, request.texts)
    else:
        rows = backend.rows_from_ids(request.token_ids)
    backend.check_dimensions(request.dimensions)
    trace = Trace(GenerationRequest(id=request.id, model=request.model), model.config.version)
    with tracked(model, trace, engine.observers):
        vectors = await backend.embed(rows, request.dimensions, request.priority, request.timeout)
        trace.prompt_tokens, trace.finished = sum(map(len, rows)), 1
    return EmbeddingResult(vectors, trace.prompt_tokens)

"""A model version the engine serves: its config, its started backend, and the requests in flight on it."""
from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import cast

from conch.engine.backend import Backend, HasGenerationDefaults, LLMBackend, TextGenerator
from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.types import SamplingParams



@dataclass
class LoadedModel:
    config: ModelConfig
    backend: Backend
    inflight: int = 0     # requests between Engine.generate's start and end; unload waits for them

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def tokenizer(self):
        tokenizer = self.backend.tokenizer
        if tokenizer is None:                 # a python, tokenizer-less or tensor-only model
            raise InvalidRequest(f"model '{self.name}' ({self.config.backend} backend) does not generate text "
                                 f"from a prompt; use /v2 infer or gRPC", param="model")
        return tokenizer

    @property
    def generator(self) -> LLMBackend:
        """The backend in its LLM role; a tensor-only model (python, embedding, tokenizer...) has none."""
        if not isinstance(self.backend, TextGenerator):
            if self.backend.capabilities.embeddings:
                raise InvalidRequest(f"model '{self.name}' serves embeddings only: use /v1/embeddings (or /v2 infer, "
                                     f"gRPC); it does not generate text", param="model")
            raise InvalidRequest(f"model '{self.name}' ({self.config.backend} backend) does not generate text; "
                                 f"use /v2 infer or gRPC", param="model")
        return cast(LLMBackend, self.backend)

    def with_defaults(self, params: SamplingParams) -> SamplingParams:
        """`params` with the model's own generation defaults where the request left a field out."""
        if isinstance(self.backend, HasGenerationDefaults):
            return self.backend.generation_defaults.apply(params)
        return params

    @property
    def context_length(self) -> int:
        return self.backend.context_length

    @property
    def vocab_size(self) -> int | None:
        tokenizer = self.backend.tokenizer
        return len(tokenizer) if isinstance(tokenizer, Sized) else None    # a transformers tokenizer has len

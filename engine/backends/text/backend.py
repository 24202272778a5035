"""The `tokenizer` and `detokenizer` model kinds: text_input -> input_ids and output_ids -> text_output,
with the tokenizer named by the config (`tokenizer:` or `weights:`, builtin refs included)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, AsyncGenerator

import numpy as np

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.errors import ModelNotReady
from conch.engine.repository.config import ModelConfig
from conch.engine.tensors.contract import tensor_interface
from conch.engine.tensors.interface import InferRequest, Tensors, bytes_tensor, check_inputs, first_string


if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class _TextModel:
    capabilities = Capabilities()
    context_length = 0

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.inputs, self.outputs = tensor_interface(config)
        self.tokenizer: PreTrainedTokenizerBase | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer

        from conch.engine.weights.folder import weights_folder

        source = self.config.resolve(self.config.tokenizer) if self.config.tokenizer else weights_folder(self.config)
        self.tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, source)

    @property
    def _started(self) -> PreTrainedTokenizerBase:
        if self.tokenizer is None:
            raise ModelNotReady(f"model '{self.config.name}' is not started")
        return self.tokenizer

    def stats(self) -> BackendStats:
        return BackendStats()

    def health(self) -> bool:
        return self.tokenizer is not None

    async def stop(self) -> None:
        return None


class TokenizerBackend(_TextModel):
    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        ids = self._started.encode(first_string(request.inputs["text_input"], "text_input"))
        yield {"input_ids": np.array(ids, dtype=np.int32)}


class DetokenizerBackend(_TextModel):
    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        ids = request.inputs["output_ids"].reshape(-1).tolist()
        yield {"text_output": bytes_tensor(self._started.decode(ids, skip_special_tokens=True))}

"""TensorRT-LLM's raw tensor contract served by any LLM backend: `input_ids`, `input_lengths`,
`request_output_len`, `end_id`, `streaming`, sampling and word-list tensors in; `output_ids`,
`sequence_length`, `cum_log_probs`, `output_log_probs` out (Triton's `inflight_batcher_llm/tensorrt_llm`).

A model takes this contract when its config declares `input_ids` and `output_ids` (Triton's tensorrt_llm
config.pbtxt); with `parameters { key: "conch_backend" ... }` it runs on Conch's own engine on a CPU.
Not streaming, `output_ids` holds the prompt then the completion (TensorRT-LLM's default) unless
`exclude_input_in_output`; streaming, each response holds only the new tokens. Shapes follow the config:
[batch, beam, tokens] when the model batches, else [beam, tokens].
"""
from __future__ import annotations

from typing import AsyncGenerator

import numpy as np

from conch.engine.engine import Engine
from conch.engine.errors import InferenceError
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.contracts import TRTLLM_INPUTS, TRTLLM_OUTPUTS
from conch.engine.tensors.contract import batches, tensor_interface
from conch.engine.tensors.interface import InferRequest, Tensors, check_inputs
from conch.engine.tensors.trtllm_inputs import prompt_ids, sampling, scalar
from conch.engine.types import GenerationDelta, GenerationRequest



def serves_trtllm(config: ModelConfig) -> bool:
    return {t.name for t in config.inputs} >= TRTLLM_INPUTS and {t.name for t in config.outputs} >= TRTLLM_OUTPUTS


class TRTLLMTensorModel:
    def __init__(self, engine: Engine, config: ModelConfig) -> None:
        self.engine, self.config = engine, config
        self.inputs, self.outputs = tensor_interface(config)
        self.batched = batches(config)
        self.declared = {t.name for t in self.outputs}

    async def generation_request(self, request: InferRequest) -> GenerationRequest:
        check_inputs(self.inputs, request.inputs, self.config.name)
        tensors, batched = request.inputs, self.batched
        tokenizer = self.engine.get(self.config.name, self.config.version).tokenizer
        gen = GenerationRequest(id=request.id, model=self.config.name, version=self.config.version,
                                prompt_token_ids=prompt_ids(tensors, batched),
                                params=sampling(tensors, batched, tokenizer),
                                stream=bool(scalar(tensors, "streaming", batched)))
        return await self.engine.prepare(gen, prompt_param="input_ids")

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        gen = await self.generation_request(request)
        exclude = bool(scalar(request.inputs, "exclude_input_in_output", self.batched))
        deltas = self.engine.generate(gen)
        ids: list[int] = [] if gen.stream or exclude else list(gen.prompt_token_ids or ())
        logprobs: list[float] = []
        try:
            async for delta in deltas:
                if delta.error:
                    raise InferenceError(delta.error)
                if gen.stream:
                    if delta.token_ids or delta.finished:
                        yield self._outputs(list(delta.token_ids), _logprobs(delta))
                    continue
                ids.extend(delta.token_ids)
                logprobs.extend(_logprobs(delta))
            if not gen.stream:
                yield self._outputs(ids, logprobs)
        finally:
            await deltas.aclose()

    def _outputs(self, ids: list[int], logprobs: list[float]) -> Tensors:
        lead = (1, 1) if self.batched else (1,)          # (batch, beam) or (beam,)
        out: Tensors = {"output_ids": np.array(ids, dtype=np.int32).reshape(*lead, len(ids)),
                        "sequence_length": np.array([len(ids)], dtype=np.int32).reshape(lead),
                        "cum_log_probs": np.array([sum(logprobs)], dtype=np.float32).reshape(lead),
                        "output_log_probs": np.array(logprobs, dtype=np.float32).reshape(*lead, len(logprobs))}
        return {k: v for k, v in out.items() if k in self.declared}


def _logprobs(delta: GenerationDelta) -> list[float]:
    return [p.chosen.logprob for p in delta.logprobs]

"""The LLM tensor contract over `Engine.generate`: text_input + sampling_parameters in, text_output out; and
`tensor_model`, any loaded model as named tensors.

Non-streamed responses carry the prompt before the completion unless `exclude_input_in_output`;
streamed responses carry only the new text, one response per delta.
"""
from __future__ import annotations

import asyncio
from typing import AsyncGenerator

import numpy as np

from conch.engine.engine import Engine
from conch.engine.errors import InferenceError, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.tensors.contract import tensor_interface
from conch.engine.tensors.images import IMAGE_INPUT, placed_text, tensor_images
from conch.engine.backend import TensorModel
from conch.engine.tensors.interface import (InferRequest, Tensors, bytes_tensor, check_inputs, first_bool,
                                            first_string)
from conch.engine.tensors.sampling import parse_json_object, sampling_params
from conch.engine.tensors.structured import split_grammar
from conch.engine.tensors.traced import TracedTensorModel
from conch.engine.tensors.trtllm import TRTLLMTensorModel, serves_trtllm
from conch.engine.tensors.word_lists import apply_words, split_words
from conch.engine.types import GenerationDelta, GenerationRequest

_FLAGS = ("exclude_input_in_output", "return_finish_reason", "return_num_input_tokens", "return_num_output_tokens")
ALL_FLAGS = {f: True for f in _FLAGS}     # every output of the contract (an ensemble's later steps may read any)


class LLMTensorModel:
    def __init__(self, engine: Engine, config: ModelConfig) -> None:
        self.engine, self.config = engine, config
        self.inputs, self.outputs = tensor_interface(config)

    async def generation_request(self, request: InferRequest) -> tuple[GenerationRequest, dict[str, bool]]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        inputs, params = request.inputs, request.parameters
        text = first_string(inputs["text_input"], "text_input")
        values = dict(params)
        if "sampling_parameters" in inputs:
            values.update(parse_json_object(first_string(inputs["sampling_parameters"], "sampling_parameters"),
                                            "sampling_parameters"))
        flags = {f: first_bool(inputs, f, _param_bool(params, f)) for f in _FLAGS}
        stream = first_bool(inputs, "stream", _param_bool(params, "stream"))
        if stream and not flags["exclude_input_in_output"] and ("exclude_input_in_output" in inputs
                                                                 or "exclude_input_in_output" in params):
            raise InvalidRequest("exclude_input_in_output false is not supported when streaming: streamed "
                                 "responses carry only the new text", param="exclude_input_in_output")
        constraint, values = await asyncio.to_thread(split_grammar, values)   # a large schema's checks: off the loop
        words, values = split_words(values)
        sampling = sampling_params(values)
        if words:
            sampling = apply_words(sampling, words, self.engine.get(self.config.name, self.config.version).tokenizer)
        images = tensor_images(inputs.get(IMAGE_INPUT))
        if images:
            model = self.engine.get(self.config.name, self.config.version)
            text = placed_text(text, images, model.backend.capabilities.vision, self.config.name)
        gen = GenerationRequest(id=request.id, model=self.config.name, version=self.config.version, prompt=text,
                                params=sampling, stream=stream, images=images,
                                grammar=constraint.spec if constraint is not None else None)
        return await self.engine.prepare(gen, prompt_param="text_input"), flags

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        gen, flags = await self.generation_request(request)
        prompt_tokens = len(gen.prompt_token_ids or ())      # Engine.prepare has tokenized the prompt
        deltas = self.engine.generate(gen)
        try:
            if gen.stream:
                async for delta in deltas:
                    _raise_on_error(delta)
                    if delta.text or delta.finished:
                        yield llm_outputs(delta.text, delta, flags, prompt_tokens)
            else:
                text, last = [], None
                async for delta in deltas:
                    _raise_on_error(delta)
                    text.append(delta.text)
                    last = delta
                prefix = "" if flags["exclude_input_in_output"] else (gen.prompt or "")
                yield llm_outputs(prefix + "".join(text), last, flags, prompt_tokens)
        finally:
            await deltas.aclose()


def tensor_model(engine: Engine, name: str, version: str | None = None) -> TensorModel:
    """The loaded model (that version, or the newest) as named tensors: its own `infer` (traced here), or the
    LLM contract over `Engine.generate` (which traces)."""
    model = engine.get(name, version)
    if isinstance(model.backend, TensorModel):          # runtime-checkable: it has its own `infer`
        return TracedTensorModel(engine, model, model.backend)
    if serves_trtllm(model.config):                     # Triton's tensorrt_llm config: token ids in and out
        return TRTLLMTensorModel(engine, model.config)
    return LLMTensorModel(engine, model.config)


def _param_bool(params: dict, key: str) -> bool:
    value = params.get(key, False)
    return value.lower() == "true" if isinstance(value, str) else bool(value)


def _raise_on_error(delta: GenerationDelta) -> None:
    if delta.error:
        raise InferenceError(delta.error)


def llm_outputs(text: str, delta: GenerationDelta | None, flags: dict[str, bool], prompt_tokens: int) -> Tensors:
    out: Tensors = {"text_output": bytes_tensor(text)}
    final = delta if delta is not None and delta.finished else None
    if flags["return_finish_reason"] and final is not None:
        out["finish_reason"] = bytes_tensor(final.finish_reason or "")
    if flags["return_num_input_tokens"]:
        out["num_input_tokens"] = np.array([prompt_tokens], dtype=np.uint32)
    if flags["return_num_output_tokens"] and final is not None and final.usage is not None:
        out["num_output_tokens"] = np.array([final.usage.completion_tokens], dtype=np.uint32)
    return out

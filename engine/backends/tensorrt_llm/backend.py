"""The `tensorrt_llm` backend: TensorRT-LLM's `LLM` in process, driven by `generate_async(streaming=True)`.

Needs the `conch[trtllm]` extra and an NVIDIA GPU; without them constructing the backend raises
BackendUnavailable naming the extra (the model fails to load, the server goes on). The engine is built from
the Hugging Face folder at load (or loaded from an engine folder, Triton's `gpt_model_path`). TensorRT-LLM
detokenizes and applies stop strings itself (Capabilities.text_output). It aborts whole requests only: a
choice aborted alone gets its final delta here and its tokens are dropped until the request ends.
Only the pure parts (mapping.py, outputs.py) are tested on CPU; this file runs in scripts/gpu-check.sh.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.tensorrt_llm.mapping import TRTRequest, llm_kwargs, to_trt_request
from conch.engine.backends.tensorrt_llm.outputs import aborted_delta, choice_delta, stats_from_iteration
from conch.engine.errors import BackendUnavailable
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest

log = logging.getLogger(__name__)
_STATS_PERIOD = 1.0          # seconds between two reads of the iteration stats


@dataclass
class _Live:
    """A request in flight: its TensorRT-LLM result, the choices ended and those aborted on their own."""

    result: Any
    n: int
    closed: set[int] = field(default_factory=set)
    cut: set[int] = field(default_factory=set)
    generated: dict[int, int] = field(default_factory=dict)


def _import_trtllm(model: str) -> Any:
    try:
        import tensorrt_llm
        from tensorrt_llm import llmapi, sampling_params
    except Exception as exc:      # ImportError, or a CUDA library that does not load on this machine
        raise BackendUnavailable(
            f"model '{model}': the tensorrt_llm backend needs TensorRT-LLM and an NVIDIA GPU; install the "
            f"extra: pip install 'conch[trtllm]' ({type(exc).__name__}: {exc})") from exc
    return tensorrt_llm, llmapi, sampling_params


class TensorRTLLMBackend:
    capabilities = Capabilities(grammar=True, logprobs=True, n=True, seed=True, text_output=True)

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.context_length = config.context_length
        self.tokenizer: Any = None
        self._trt, self._llmapi, self._sampling = _import_trtllm(config.name)
        self._llm: Any = None
        self._live: dict[str, _Live] = {}
        self._stats: BackendStats | None = None
        self._poller: asyncio.Task | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer

        from conch.engine.weights.folder import weights_folder

        kwargs = {**llm_kwargs(self.config, weights_folder(self.config)), "guided_decoding_backend": "xgrammar"}
        if "kv_cache_config" in kwargs:
            kwargs["kv_cache_config"] = self._llmapi.KvCacheConfig(**kwargs["kv_cache_config"])
        self._llm = await asyncio.to_thread(self._trt.LLM, **kwargs)
        self.tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, kwargs["tokenizer"])
        self._poller = asyncio.create_task(self._poll_stats(), name=f"trtllm-stats-{self.config.name}")

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self._llm is not None:
            await asyncio.to_thread(self._llm.shutdown)
        self._llm = None

    def health(self) -> bool:
        return self._llm is not None

    def stats(self) -> BackendStats:
        running = sum(live.n - len(live.closed) for live in self._live.values())
        return self._stats if self._stats is not None else BackendStats(running=running)

    async def _poll_stats(self) -> None:
        """The newest iteration stats, once a period (TensorRT-LLM hands each iteration's stats out once)."""
        while self._llm is not None:
            try:
                items = await asyncio.to_thread(self._llm.get_stats, 2)
            except Exception:                     # stats are best effort: never fail the model for them
                log.debug("tensorrt_llm get_stats failed", exc_info=True)
                items = []
            if items:
                last = items[-1]
                running = sum(live.n - len(live.closed) for live in self._live.values())
                self._stats = stats_from_iteration(json.loads(last) if isinstance(last, str) else last, running)
            await asyncio.sleep(_STATS_PERIOD)

    # -- requests --------------------------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        trt = to_trt_request(request)
        if request.grammar is not None:
            from conch.grammars import validate

            validate(request.grammar, "xgrammar", self.config.grammar_bounds)   # a 400 for what it cannot enforce
        result = self._llm.generate_async(list(trt.prompt_token_ids), sampling_params=self._params(trt),
                                          streaming=True)
        live = self._live[request.id] = _Live(result, request.params.n)
        prompt = len(trt.prompt_token_ids)
        try:
            async for out in result:
                for output in out.outputs:
                    if output.index in live.closed:
                        continue
                    live.generated[output.index] = len(output.token_ids)
                    delta = choice_delta(request.id, output, prompt, trt.top_logprobs, self._piece)
                    if delta.finished:
                        live.closed.add(output.index)
                    yield delta
                for index in sorted(live.cut - live.closed):
                    live.closed.add(index)
                    yield aborted_delta(request.id, index, prompt, live.generated.get(index, 0))
                if len(live.closed) == live.n:
                    break
        finally:
            self._live.pop(request.id, None)
            if len(live.closed) < live.n:            # the consumer went away: free the engine's slots
                result.abort()

    async def abort(self, request_id: str, index: int | None = None) -> None:
        live = self._live.get(request_id)
        if live is None:
            return
        live.cut |= set(range(live.n)) if index is None else {index}
        if live.cut | live.closed >= set(range(live.n)):
            live.result.abort()                      # its 'cancelled' outputs end the open choices

    def _params(self, trt: TRTRequest) -> Any:
        kwargs = dict(trt.sampling)
        if trt.guided is not None:
            kwargs["guided_decoding"] = self._sampling.GuidedDecodingParams(**trt.guided)
        if trt.logit_bias:
            import torch

            bias = torch.zeros(len(self.tokenizer), dtype=torch.float32)
            for token, value in trt.logit_bias:
                bias[token] = value
            kwargs["embedding_bias"] = bias
        return self._sampling.SamplingParams(**kwargs)

    def _piece(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

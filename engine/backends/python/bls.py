"""Business Logic Scripting: a python model's `InferenceRequest(model_name=...).exec()` runs that request on
another loaded model of the same engine, as Triton's BLS does.

`execute` runs in a worker thread, so `exec` hands the request to the server's event loop and waits there for
the answer; `exec(decoupled=True)` returns an iterator that yields each response as the model produces it
(a streaming LLM's deltas). `async_exec` awaits the same from an `async def execute`. A failure is an error
response (`has_error()`), never an exception, as in Triton.
"""
from __future__ import annotations

import asyncio
import queue
import threading
import uuid
from typing import AsyncGenerator, AsyncIterator, Iterator

from conch.engine.backends.python.messages import InferenceRequest, InferenceResponse, TritonError, set_runner
from conch.engine.backends.python.tensor import Tensor, TritonModelException
from conch.engine.engine import Engine
from conch.engine.errors import EngineError, InvalidRequest
from conch.engine.tensors.interface import InferRequest, Tensors
from conch.engine.tensors.llm import tensor_model

_DONE = object()


class Runner:
    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self.engine, self.loop = engine, loop
        self.loop_thread = threading.get_ident()     # built on the loop (bind): exec() there would deadlock

    def run(self, request: InferenceRequest, decoupled: bool) -> InferenceResponse | Iterator[InferenceResponse]:
        if threading.get_ident() == self.loop_thread:
            raise TritonModelException("exec() would block the server's event loop: use async_exec()")
        if not decoupled:
            return asyncio.run_coroutine_threadsafe(self._single(request), self.loop).result()
        return self._iterate(request)

    async def run_async(self, request: InferenceRequest,
                        decoupled: bool) -> InferenceResponse | AsyncIterator[InferenceResponse]:
        if not decoupled:
            return await self._on_server(self._single(request))
        return _async_iter(self._iterate(request))

    async def _on_server(self, coro):
        if threading.get_ident() == self.loop_thread:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def _single(self, request: InferenceRequest) -> InferenceResponse:
        answers = []
        async for answer in self._answers(request):
            answers.append(answer)
        if len(answers) > 1 and not any(a.has_error() for a in answers):
            return _error(f"model '{request.model_name()}' answered {len(answers)} times: use exec(decoupled=True)")
        return answers[-1] if answers else _error(f"model '{request.model_name()}' returned no response")

    def _iterate(self, request: InferenceRequest) -> Iterator[InferenceResponse]:
        items: queue.Queue = queue.Queue()

        async def pump() -> None:
            try:
                async for answer in self._answers(request):
                    items.put(answer)
            finally:
                items.put(_DONE)

        asyncio.run_coroutine_threadsafe(pump(), self.loop)
        while (item := items.get()) is not _DONE:
            yield item

    async def _answers(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Each response of the model, then nothing; a failure is one error response."""
        wanted = set(request.requested_output_names())
        try:
            responses = self._open(request)
            try:
                async for tensors in responses:
                    yield InferenceResponse([Tensor(n, a) for n, a in tensors.items() if not wanted or n in wanted])
            finally:
                await responses.aclose()
        except EngineError as exc:
            code = TritonError.INVALID_ARG if isinstance(exc, InvalidRequest) else TritonError.INTERNAL
            yield InferenceResponse(error=TritonError(exc.message, code))

    def _open(self, request: InferenceRequest) -> AsyncGenerator[Tensors, None]:
        version = str(request.model_version()) if request.model_version() >= 0 else None
        model = tensor_model(self.engine, request.model_name(), version)
        inputs = {t.name(): t.as_numpy() for t in request.inputs()}
        return model.infer(InferRequest(request.request_id() or uuid.uuid4().hex, inputs, request.parameter_dict()))


def bind(engine: Engine) -> None:
    """Called by each python model's start, on the server's loop: BLS from any model runs on this engine."""
    set_runner(Runner(engine, asyncio.get_running_loop()))


def _error(message: str) -> InferenceResponse:
    return InferenceResponse(error=TritonError(message))


async def _async_iter(items: Iterator[InferenceResponse]) -> AsyncIterator[InferenceResponse]:
    while (item := await asyncio.to_thread(next, items, _DONE)) is not _DONE:
        yield item    # type: ignore[misc]

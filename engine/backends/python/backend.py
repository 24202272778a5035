"""The `python` backend: a user's `<version>/model.py` with a `TritonPythonModel` class, as Triton's
Python backend runs it: `auto_complete_config(config)`, `initialize(args)`, `execute(requests)`,
`finalize()`.

`execute` (plain or `async def`) runs in a worker thread, one call at a time per instance; a model runs
`instance_group` count instances (instances.py), so that many requests (or batches) run at once. Inputs and
outputs are numpy arrays. With `dynamic_batching`, the requests that queued meanwhile reach one `execute` together.
A decoupled model (`model_transaction_policy { decoupled: true }`) answers through each request's response
sender, any number of times and from any thread, until a send carries TRITONSERVER_RESPONSE_COMPLETE_FINAL;
its `execute` returns None. Other models return one response per request. An error response (or an
exception) fails that request: TritonError.INVALID_ARG is the client's fault (400), anything else a 500.
"""
from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import sys
import threading
import time
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import Any, AsyncGenerator

from google.protobuf import json_format

from conch.engine import torch_threads
from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.python import bls
from conch.engine.backends.dynamic_batcher import DynamicBatcher
from conch.engine.backends.python import utils as pb_utils
from conch.engine.backends.python.autocomplete import auto_complete
from conch.engine.backends.python.environment import import_paths, importing
from conch.engine.backends.python.instances import InstancePool
from conch.engine.backends.python.sequences import Sequences
from conch.engine.backends.python.messages import (TRITONSERVER_RESPONSE_COMPLETE_FINAL, InferenceRequest,
                                             InferenceResponse, InferenceResponseSender, TritonError)
from conch.engine.engine import Engine
from conch.engine.errors import BackendUnavailable, InferenceError, InvalidRequest, ModelCodeFailed
from conch.engine.repository.config import ModelConfig
from conch.engine.tensors.contract import batches
from conch.engine.tensors.interface import InferRequest, Tensors, check_inputs
from conch.engine.tensors.triton_config import to_triton

sys.modules.setdefault("triton_python_backend_utils", pb_utils)


class PythonBackend:
    capabilities = Capabilities()
    tokenizer = None
    context_length = 0

    def __init__(self, config: ModelConfig) -> None:
        self.config = self.completed_config = config
        self.inputs, self.outputs = config.inputs, config.outputs
        self.engine: Engine | None = None
        self._pool: InstancePool | None = None
        self.executions = 0               # execute() calls (Triton's execution count)
        self._sequences: Sequences | None = None
        self._batcher: DynamicBatcher | None = None

    def bind(self, engine: Engine) -> None:
        self.engine = engine

    async def start(self) -> None:
        if self.engine is not None:
            bls.bind(self.engine)
            if self.config.rate_limiter is not None:
                self.engine.resources.register(self.config.rate_limiter)
        paths = import_paths(self.config)
        with importing(paths):
            module = _load_module(self.config)
            self.config = self.completed_config = auto_complete(module.TritonPythonModel, self.config)
            self.inputs, self.outputs = self.config.inputs, self.config.outputs
            self._pool = InstancePool([await self._initialized(module.TritonPythonModel(), i)
                                       for i in range(max(1, self.config.instance_count))], self._admit)
        rules = self.config.sequence_batching
        if rules is not None:
            self._sequences = Sequences(rules, len(self._pool), batches(self.config), self.config.name)
        elif self.config.dynamic_batching is not None and not self.config.decoupled:
            self._batcher = DynamicBatcher(self.config.name, self._execute, max(1, self.config.max_batch_size),
                                           self.config.dynamic_batching, instances=len(self._pool),
                                           admit=self._admit)
            self._batcher.start()

    def _admit(self) -> AbstractAsyncContextManager:
        """The rate limiter's resources for one execution (none without a rate_limiter or an engine)."""
        if self.engine is None or self.config.rate_limiter is None:
            return nullcontext()
        return self.engine.resources.hold(self.config.rate_limiter)

    async def _initialized(self, model: Any, index: int) -> Any:
        if hasattr(model, "initialize"):
            try:
                await torch_threads.run(model.initialize, _args(self.config, index))
            except Exception as exc:
                raise ModelCodeFailed(f"model '{self.config.name}': initialize() failed: {exc}") from exc
        return model

    @property
    def pool(self) -> InstancePool:
        if self._pool is None:
            raise BackendUnavailable(f"model '{self.config.name}' is not started")
        return self._pool

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        began = time.perf_counter()
        check_inputs(self.inputs, request.inputs, self.config.name)
        tensors = [pb_utils.Tensor(name, array) for name, array in request.inputs.items()]
        pb_request = InferenceRequest(inputs=tensors, request_id=request.id, parameters=request.parameters,
                                      correlation_id=request.parameters.get("sequence_id", 0),
                                      model_name=self.config.name)
        pb_request._timing, pb_request._enqueued = request.timing, time.perf_counter()
        request.timing.compute_input = pb_request._enqueued - began
        if self._sequences is not None:
            yield await self._in_sequence(self._sequences, request, pb_request)
            return
        if self.config.decoupled:
            async for outputs in self._decoupled(pb_request):
                yield outputs
            return
        if self._batcher is not None:      # Triton's dynamic batcher: execute() gets several requests
            response = await self._batcher.submit(pb_request, 1, _priority(request.parameters))
        else:
            response = (await self.pool.run(lambda model: self._checked(model, [pb_request])))[0]
        yield self._read(response, request)

    async def _in_sequence(self, sequences: Sequences, request: InferRequest,
                           pb_request: InferenceRequest) -> Tensors:
        """One request of a sequence: in order after the sequence's earlier ones, on its instance, with its
        control and state tensors; the state outputs are kept for the next request."""
        corrid, start, end = sequences.correlation(request.parameters)
        seq = sequences.sequence(corrid, start)
        async with seq.lock:
            step = sequences.step(seq, corrid, start, end)
            pb_request._inputs += [pb_utils.Tensor(name, array) for name, array in step.extra.items()]
            model = self.pool.instances[step.instance]
            async with sequences.locks[step.instance], self._admit():
                response = (await torch_threads.run(self._checked, model, [pb_request]))[0]
            return sequences.finish(seq, step, self._read(response, request))

    def _read(self, response: InferenceResponse, request: InferRequest) -> Tensors:
        began = time.perf_counter()
        try:
            return self._outputs(response)
        finally:
            request.timing.compute_output += time.perf_counter() - began

    async def _decoupled(self, pb_request: InferenceRequest) -> AsyncGenerator[Tensors, None]:
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue[tuple[InferenceResponse | None, int]] = asyncio.Queue()
        gone = threading.Event()

        timing = pb_request._timing

        def sink(response: InferenceResponse | None, flags: int) -> None:      # any thread of the model
            loop.call_soon_threadsafe(answers.put_nowait, (response, flags))

        pb_request.attach_sender(InferenceResponseSender(sink, gone.is_set))
        try:
            returned = await self.pool.run(lambda model: self._call_execute(model, [pb_request]))
            if returned is not None:
                raise InferenceError(f"model '{self.config.name}' is decoupled: execute() must return None and "
                                     f"answer through request.get_response_sender()")
            while True:
                response, flags = await answers.get()
                if response is not None:
                    began = time.perf_counter()
                    outputs = self._outputs(response)
                    timing.compute_output += time.perf_counter() - began
                    yield outputs
                if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                    return
        finally:
            gone.set()                     # the client went away or the stream ended: is_cancelled() is true

    def _outputs(self, response: InferenceResponse) -> Tensors:
        error = response.error()
        if error is not None:
            message = f"model '{self.config.name}': {error.message()}"
            if error.code() == TritonError.INVALID_ARG:
                raise InvalidRequest(message)
            raise InferenceError(message)
        return {t.name(): t.as_numpy() for t in response.output_tensors()}

    def _execute(self, requests: list) -> list:
        """A batch from the dynamic batcher, on a free instance (the batcher runs at most one per instance)."""
        with self.pool.borrow() as model:
            return self._checked(model, requests)

    def _checked(self, model: Any, requests: list) -> list:
        responses = self._call_execute(model, requests)
        if not responses or len(responses) != len(requests):
            raise InferenceError(f"model '{self.config.name}': execute() must return one response per request")
        return responses

    def _call_execute(self, model: Any, requests: list) -> Any:
        """execute() in this worker thread; an `async def execute` runs on a loop of its own here."""
        _started(requests)
        self.executions += 1
        try:
            if inspect.iscoroutinefunction(model.execute):
                return asyncio.run(model.execute(requests))
            return model.execute(requests)
        except Exception as exc:
            raise InferenceError(f"model '{self.config.name}': execute() failed: {exc}") from exc

    @property
    def steps(self) -> int:
        """Executions: batches when batching (Triton's nv_inference_exec_count)."""
        return self.executions

    def stats(self) -> BackendStats:
        """Requests queued in the dynamic batcher, when there is one (a tensor model holds no KV cache)."""
        return BackendStats(waiting=self._batcher.pending if self._batcher is not None else 0)

    def health(self) -> bool:
        return self._pool is not None

    async def stop(self) -> None:
        if self._batcher is not None:
            await self._batcher.stop()
        for model in self._pool.instances if self._pool is not None else ():
            if hasattr(model, "finalize"):
                await torch_threads.run(model.finalize)
        self._pool = None


def _started(requests: list) -> None:
    """Each request's wait (for an instance, or in the batcher) ends now; its batch is all of them."""
    now = time.perf_counter()
    for r in requests:
        if getattr(r, "_timing", None) is not None:
            r._timing.queue, r._timing.batch_size = now - r._enqueued, len(requests)


def _priority(parameters: dict) -> int:
    try:
        return int(parameters.get("priority", 0))
    except (TypeError, ValueError):
        raise InvalidRequest(f"parameter 'priority' must be an integer, got {parameters['priority']!r}",
                             param="priority") from None


def _load_module(config: ModelConfig):
    path = config.version_dir / "model.py" if config.version_dir is not None else None
    if path is None or not path.exists():
        raise ModelCodeFailed(f"model '{config.name}': the python backend needs {path}")
    module_name = f"conch_python_model_{config.name}_{config.version}_{id(config):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelCodeFailed(f"model '{config.name}': {path} cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ModelCodeFailed(f"model '{config.name}': {path} failed to import: {exc}") from exc
    if not hasattr(module, "TritonPythonModel"):
        raise ModelCodeFailed(f"model '{config.name}': {path} defines no TritonPythonModel class")
    return module


def _args(config: ModelConfig, index: int = 0) -> dict[str, str]:
    model_config = json_format.MessageToDict(to_triton(config), preserving_proto_field_name=True)
    return {"model_config": json.dumps(model_config), "model_name": config.name,
            "model_version": config.version, "model_repository": str(Path(config.path or ".")),
            "model_instance_kind": "CPU", "model_instance_name": f"{config.name}_{index}",
            "model_instance_device_id": "0"}

"""The `python` backend: a user's `<version>/model.py` with a `TritonPythonModel` class, as Triton's
Python backend runs it: `initialize(args)`, `execute(requests) -> responses`, `finalize()`.

`execute` runs in a worker thread, one batch at a time per model; inputs and outputs are numpy arrays. With
`dynamic_batching` in the config, the requests that queued meanwhile reach one `execute` call together.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, AsyncGenerator

from google.protobuf import json_format

from engine.backend import BackendStats, Capabilities
from engine.backends.dynamic_batcher import DynamicBatcher
from engine.backends.python import utils as pb_utils
from engine.errors import BackendUnavailable, InvalidRequest
from engine.repository.config import ModelConfig
from engine.tensors.interface import InferenceError, InferRequest, Tensors, check_inputs
from engine.tensors.triton_config import to_triton

sys.modules.setdefault("triton_python_backend_utils", pb_utils)


class PythonBackend:
    capabilities = Capabilities()
    tokenizer = None
    context_length = 0

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.inputs, self.outputs = config.inputs, config.outputs
        self._model: Any = None
        self._lock = asyncio.Lock()
        self._batcher: DynamicBatcher | None = None

    async def start(self) -> None:
        self._model = _load_module(self.config).TritonPythonModel()
        if hasattr(self._model, "initialize"):
            try:
                await asyncio.to_thread(self._model.initialize, _args(self.config))
            except Exception as exc:
                raise BackendUnavailable(f"model '{self.config.name}': initialize() failed: {exc}") from exc
        if self.config.dynamic_batching is not None:
            self._batcher = DynamicBatcher(self.config.name, self._execute, max(1, self.config.max_batch_size),
                                           self.config.dynamic_batching)
            self._batcher.start()

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        tensors = [pb_utils.Tensor(name, array) for name, array in request.inputs.items()]
        pb_request = pb_utils.InferenceRequest(tensors, request.id, request.parameters)
        if self._batcher is not None:      # Triton's dynamic batcher: execute() gets several requests
            response = await self._batcher.submit(pb_request, 1, _priority(request.parameters))
        else:
            async with self._lock:
                response = (await asyncio.to_thread(self._execute, [pb_request]))[0]
        if response.has_error():
            raise InferenceError(f"model '{self.config.name}': {response.error().message()}")
        yield {t.name(): t.as_numpy() for t in response.output_tensors()}

    def _execute(self, requests: list) -> list:
        try:
            responses = self._model.execute(requests)
        except Exception as exc:
            raise InferenceError(f"model '{self.config.name}': execute() failed: {exc}") from exc
        if not responses or len(responses) != len(requests):
            raise InferenceError(f"model '{self.config.name}': execute() must return one response per request")
        return responses

    def stats(self) -> BackendStats:
        """Requests queued in the dynamic batcher, when there is one (a tensor model holds no KV cache)."""
        return BackendStats(waiting=self._batcher.pending if self._batcher is not None else 0)

    def health(self) -> bool:
        return self._model is not None

    async def stop(self) -> None:
        if self._batcher is not None:
            await self._batcher.stop()
        if self._model is not None and hasattr(self._model, "finalize"):
            await asyncio.to_thread(self._model.finalize)
        self._model = None


def _priority(parameters: dict) -> int:
    try:
        return int(parameters.get("priority", 0))
    except (TypeError, ValueError):
        raise InvalidRequest(f"parameter 'priority' must be an integer, got {parameters['priority']!r}",
                             param="priority") from None


def _load_module(config: ModelConfig):
    path = config.version_dir / "model.py" if config.version_dir is not None else None
    if path is None or not path.exists():
        raise BackendUnavailable(f"model '{config.name}': the python backend needs {path}")
    module_name = f"conch_python_model_{config.name}_{config.version}_{id(config):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BackendUnavailable(f"model '{config.name}': {path} cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise BackendUnavailable(f"model '{config.name}': {path} failed to import: {exc}") from exc
    if not hasattr(module, "TritonPythonModel"):
        raise BackendUnavailable(f"model '{config.name}': {path} defines no TritonPythonModel class")
    return module


def _args(config: ModelConfig) -> dict[str, str]:
    model_config = json_format.MessageToDict(to_triton(config), preserving_proto_field_name=True)
    return {"model_config": json.dumps(model_config), "model_name": config.name,
            "model_version": config.version, "model_repository": str(Path(config.path or ".")),
            "model_instance_kind": "CPU", "model_instance_name": f"{config.name}_0"}

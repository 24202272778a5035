"""The `python` backend: a user's `<version>/model.py` with a `TritonPythonModel` class, as Triton's
Python backend runs it: `initialize(args)`, `execute(requests) -> responses`, `finalize()`.

`execute` runs in a worker thread, one batch at a time per model; inputs and outputs are numpy arrays.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, AsyncIterator

from google.protobuf import json_format

from engine.backend import Capabilities
from engine.backends.python import utils as pb_utils
from engine.ensemble.tensors import InferenceError, InferRequest, Tensors, check_inputs
from engine.errors import BackendUnavailable, InvalidRequest
from engine.repository.config import ModelConfig

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

    async def start(self) -> None:
        self._model = _load_module(self.config).TritonPythonModel()
        if hasattr(self._model, "initialize"):
            try:
                await asyncio.to_thread(self._model.initialize, _args(self.config))
            except Exception as exc:
                raise BackendUnavailable(f"model '{self.config.name}': initialize() failed: {exc}") from exc

    async def infer(self, request: InferRequest) -> AsyncIterator[Tensors]:
        check_inputs(self.inputs, request.inputs, self.config.name)
        tensors = [pb_utils.Tensor(name, array) for name, array in request.inputs.items()]
        pb_request = pb_utils.InferenceRequest(tensors, request.id, request.parameters)
        async with self._lock:
            try:
                responses = await asyncio.to_thread(self._model.execute, [pb_request])
            except Exception as exc:
                raise InferenceError(f"model '{self.config.name}': execute() failed: {exc}") from exc
        if not responses or len(responses) != 1:
            raise InferenceError(f"model '{self.config.name}': execute() must return one response per request")
        response = responses[0]
        if response.has_error():
            raise InferenceError(f"model '{self.config.name}': {response.error().message()}")
        yield {t.name(): t.as_numpy() for t in response.output_tensors()}

    def generate(self, request):
        raise InvalidRequest(f"model '{self.config.name}' is a python model: use /v2 infer, generate or gRPC")

    async def abort(self, request_id: str, index: int | None = None) -> None:
        return None

    def health(self) -> bool:
        return self._model is not None

    async def stop(self) -> None:
        if self._model is not None and hasattr(self._model, "finalize"):
            await asyncio.to_thread(self._model.finalize)
        self._model = None


def _load_module(config: ModelConfig):
    path = config.version_dir / "model.py" if config.version_dir is not None else None
    if path is None or not path.exists():
        raise BackendUnavailable(f"model '{config.name}': the python backend needs {path}")
    module_name = f"conch_python_model_{config.name}_{config.version}_{id(config):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise BackendUnavailable(f"model '{config.name}': {path} failed to import: {exc}") from exc
    if not hasattr(module, "TritonPythonModel"):
        raise BackendUnavailable(f"model '{config.name}': {path} defines no TritonPythonModel class")
    return module


def _args(config: ModelConfig) -> dict[str, str]:
    from engine.repository.pbtxt import to_triton

    model_config = json_format.MessageToDict(to_triton(config), preserving_proto_field_name=True)
    return {"model_config": json.dumps(model_config), "model_name": config.name,
            "model_version": config.version, "model_repository": str(Path(config.path or ".")),
            "model_instance_kind": "CPU", "model_instance_name": f"{config.name}_0"}

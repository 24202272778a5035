"""pb_utils' request, response, error and response-sender types, as a Triton model.py uses them.

A request built by a model (`InferenceRequest(model_name=..., requested_output_names=..., inputs=...)`) is a
BLS call: `exec()` / `async_exec()` run it on another loaded model (engine/backends/python/bls.py). A request
the backend hands to `execute` carries a response sender, through which a decoupled model answers any number
of times, ending with the TRITONSERVER_RESPONSE_COMPLETE_FINAL flag.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Callable, Protocol

from conch.engine.backends.python.tensor import Tensor, TritonModelException

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2


class TritonError(Exception):
    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None,
                 parameters: dict | str | None = None) -> None:
        self._outputs, self._error = list(output_tensors or []), error
        self._parameters = json.loads(parameters) if isinstance(parameters, str) else dict(parameters or {})

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


Sink = Callable[[InferenceResponse | None, int], None]   # thread-safe: called from any thread of the model


class InferenceResponseSender:
    """Answers one request; after a send with the final flag, nothing more may be sent."""

    def __init__(self, sink: Sink, cancelled: Callable[[], bool] = lambda: False) -> None:
        self._sink, self._cancelled = sink, cancelled
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        with self._lock:
            if self._closed:
                raise TritonModelException("the response sender was already closed with the final flag")
            if response is None and not flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                raise TritonModelException("send() without a response must carry the final flag")
            self._closed = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            self._sink(response, flags)

    def is_cancelled(self) -> bool:
        return self._cancelled()

    @property
    def closed(self) -> bool:
        return self._closed


class InferenceRequest:
    def __init__(self, model_name: str = "", requested_output_names: list[str] | None = None,
                 inputs: list[Tensor] | None = None, request_id: str = "", correlation_id: int | str = 0,
                 model_version: int = -1, flags: int = 0, timeout: int = 0, preferred_memory: Any = None,
                 trace: Any = None, parameters: dict | str | None = None) -> None:
        self._model_name, self._model_version = model_name, model_version
        self._requested = list(requested_output_names or [])
        self._inputs, self._id = list(inputs or []), request_id
        self._correlation_id, self._flags, self._timeout = correlation_id, flags, timeout
        self._parameters = json.loads(parameters) if isinstance(parameters, str) else dict(parameters or {})
        self._sender: InferenceResponseSender | None = None
        self._timing: Any = None          # Conch's: the request's InferTiming, filled in around execute()
        self._enqueued = 0.0              # perf_counter() when it started waiting for an instance or batch

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def timeout(self) -> int:
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def requested_output_names(self) -> list[str]:
        return self._requested

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def parameter_dict(self) -> dict[str, Any]:
        return dict(self._parameters)

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            raise TritonModelException("only a request handed to execute() has a response sender")
        return self._sender

    def attach_sender(self, sender: InferenceResponseSender) -> None:
        self._sender = sender

    def is_cancelled(self) -> bool:
        return self._sender is not None and self._sender.is_cancelled()

    def exec(self, decoupled: bool = False, timeout: float | None = None):
        """Run this request on `model_name` (BLS): one response, or with `decoupled` an iterator of them."""
        return _runner().run(self, decoupled)

    async def async_exec(self, decoupled: bool = False):
        return await _runner().run_async(self, decoupled)


class BLSRunner(Protocol):
    def run(self, request: InferenceRequest, decoupled: bool) -> Any: ...

    async def run_async(self, request: InferenceRequest, decoupled: bool) -> Any: ...


_RUNNER: list[BLSRunner] = []     # the engine's BLS runner (engine/backends/python/bls.py), set when one starts


def set_runner(runner: BLSRunner) -> None:
    _RUNNER[:] = [runner]


def _runner() -> BLSRunner:
    if not _RUNNER:
        raise TritonModelException("BLS needs a running server: no python model has started")
    return _RUNNER[0]

"""The in-process API, read as tritonserver's Python API reads, so that an application (a Ray Serve deployment, a
notebook) embeds Conch without HTTP in between:

    from conch.gateway import server as tritonserver
    server = tritonserver.Server(tritonserver.Options(model_repository=path, log_info=True))
    server.start(wait_until_ready=True)
    model = server.model("ensemble")
    model.ready()
    responses = model.infer(inputs={"text_input": [[query]], "max_tokens": np.array([[64]], dtype=np.int32)})
    text = list(responses)[0].outputs["text_output"].to_string_array()[0]
    server.stop()

The same engine, repository (object storage included), model control, backends, batching and response cache as
`conch serve`; the engine runs on an event loop in a thread of its own, and `infer` returns a blocking iterator
of responses (a decoupled model's several)."""
from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from conch.engine.engine import Engine
from conch.engine.errors import EngineError, InvalidRequest
from conch.engine.model_control import ModelControl
from conch.engine.repository import ModelRepository
from conch.engine.response_cache import open_cache
from conch.engine.tensors.interface import NUMPY_DTYPES, InferRequest, bytes_tensor
from conch.engine.tensors.llm import tensor_model

_END = object()


@dataclass(frozen=True)
class Options:
    """tritonserver.Options' names where Conch has the setting; any other keyword is a TypeError."""
    model_repository: str | Path | Sequence[str | Path] | None = None   # None: the embedded default model
    model_control_mode: str = "none"             # none | explicit | poll
    startup_models: Sequence[str] = ()           # explicit mode: load these at start ("*" = all)
    repository_poll_secs: float = 15.0
    response_cache: str | None = None            # memory | redis://HOST:PORT/DB, as --response-cache
    max_queue_size: int | None = None
    log_info: bool = False                       # the log levels Triton's options name
    log_warn: bool = True
    log_error: bool = True
    log_verbose: int = 0


class Tensor(np.ndarray):
    """An output: a numpy array (BYTES outputs hold bytes) that also reads as Triton's Tensor does."""

    def to_string_array(self) -> np.ndarray:
        return np.vectorize(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v),
                            otypes=[object])(np.asarray(self))

    def to_bytes_array(self) -> np.ndarray:
        return np.asarray(self)


@dataclass(frozen=True)
class InferenceResponse:
    model: str
    request_id: str
    outputs: dict[str, Tensor]
    final: bool = False                          # the request's last response


class Server:
    def __init__(self, options: Options | None = None, **kwargs: Any) -> None:
        self.options = options or Options(**kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._control: ModelControl | None = None
        self._ids = itertools.count(1)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self, wait_until_ready: bool = False, timeout: float | None = None) -> Server:
        """Open the repository and load its models (control mode permitting); with `wait_until_ready`, return
        once they are up (a model that fails is recorded, as in `conch serve`, and the server stays up)."""
        if self._loop is not None:
            raise RuntimeError("the server is already started")
        o = self.options
        if o.log_info or o.log_verbose:
            logging.getLogger("conch").setLevel(logging.INFO if not o.log_verbose else logging.DEBUG)
        engine = Engine(ModelRepository(o.model_repository), cache=open_cache(o.response_cache),
                        max_queue_size=o.max_queue_size)
        self._control = ModelControl(engine, o.model_control_mode, list(o.startup_models), o.repository_poll_secs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="conch-server", daemon=True)
        self._thread.start()
        started = self._submit(self._control.start())
        if wait_until_ready:
            started.result(timeout)
        return self

    def stop(self) -> None:
        if self._loop is None or self._control is None:
            return
        self._submit(self._control.stop()).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._loop = self._thread = self._control = None

    def __enter__(self) -> Server:
        return self.start(wait_until_ready=True) if self._loop is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state -------------------------------------------------------------------------------------------
    def live(self) -> bool:
        return self._loop is not None

    def ready(self) -> bool:
        return self._control is not None and self._control.engine.ready()

    def models(self) -> dict[str, dict[str, str]]:
        """The repository index: name -> {version, state, reason}."""
        return {s.name: {"version": s.version, "state": s.state, "reason": s.reason}
                for s in self._running().index()}

    def model(self, name: str, version: int | str = -1) -> Model:
        return Model(self, name, None if str(version) == "-1" else str(version))

    def load(self, name: str) -> None:
        self._submit(self._running().load(name)).result()

    def unload(self, name: str) -> None:
        self._submit(self._running().unload(name)).result()

    # -- the loop ----------------------------------------------------------------------------------------
    def _running(self) -> ModelControl:
        if self._control is None:
            raise RuntimeError("the server is not started: call start() first")
        return self._control

    def _submit(self, coroutine: Any) -> Any:
        assert self._loop is not None                       # invariant: only called once started
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)


@dataclass
class Model:
    server: Server
    name: str
    version: str | None = None
    _inputs: dict[str, str] = field(default_factory=dict, repr=False)

    def ready(self) -> bool:
        return self.server._running().engine.ready(self.name, self.version)

    def infer(self, inputs: Mapping[str, Any] | None = None, parameters: Mapping[str, Any] | None = None,
              request_id: str = "", timeout: float | None = None) -> Iterator[InferenceResponse]:
        """Run one request; its responses as they come (one, or a decoupled model's several). Inputs are numpy
        arrays or nested lists (strings become BYTES; numbers take the input's declared type), batch dimension
        included as the model's config has it."""
        engine = self.server._running().engine
        model = tensor_model(engine, self.name, self.version)
        specs = {s.name: s.datatype for s in model.inputs}
        request = InferRequest(id=request_id or f"inprocess-{next(self.server._ids)}",
                               inputs={k: _array(k, v, specs.get(k)) for k, v in (inputs or {}).items()},
                               parameters=dict(parameters or {}))
        results: queue.Queue = queue.Queue()

        async def run() -> None:
            try:
                async for outputs in model.infer(request):
                    results.put(outputs)
            except BaseException as exc:
                results.put(exc)
            finally:
                results.put(_END)
        self.server._submit(run())
        return _responses(self.name, request.id, results, timeout)


def _responses(model: str, request_id: str, results: queue.Queue, timeout: float | None) -> Iterator[InferenceResponse]:
    pending = results.get(timeout=timeout)
    while pending is not _END:
        if isinstance(pending, BaseException):
            raise pending
        following = results.get(timeout=timeout)
        outputs = {name: np.asarray(array).view(Tensor) for name, array in pending.items()}
        yield InferenceResponse(model, request_id, outputs, final=following is _END)
        pending = following


def _array(name: str, value: Any, datatype: str | None) -> np.ndarray:
    """A client's input as the engine's tensor: strings as BYTES, numbers in the declared type."""
    array = np.asarray(value)
    if array.dtype.kind in "USO":
        return bytes_tensor(array.reshape(-1).tolist()).reshape(array.shape)
    if datatype in NUMPY_DTYPES and datatype != "BYTES" and array.dtype != NUMPY_DTYPES[datatype]:
        try:
            return array.astype(NUMPY_DTYPES[datatype])
        except (TypeError, ValueError):
            raise InvalidRequest(f"input '{name}' does not convert to {datatype}", param=name) from None
    return array


__all__ = ["EngineError", "InferenceResponse", "Model", "Options", "Server", "Tensor"]

"""The gRPC face of Triton's logging, trace and system shared memory extensions (the state they share with
HTTP lives in gateway/kserve/: logging_settings.py, tracing.py, shared_memory.py). A request that changes a
setting or a region needs the `admin` role when keys are configured; reading needs a valid key. CUDA shared
memory answers UNIMPLEMENTED, naming it."""
from __future__ import annotations

from typing import Any

import grpc
from tritonclient.grpc import service_pb2 as pb

from conch.gateway.kserve.shared_memory import CUDA_REFUSAL
from conch.gateway.kserve.state import TritonState

_LOG_FIELDS = {bool: "bool_param", int: "uint32_param", str: "string_param"}


class ExtensionRPCs:
    """Mixed into InferenceService, which supplies `state`, `_run` (errors become the call's status) and
    `_authorize_change` (the gate)."""

    state: TritonState

    async def _authorize_change(self, context, changes: bool) -> None: ...

    async def _run(self, context, work): ...

    async def LogSettings(self, request, context):
        async def work():
            changes = {k: _setting(v) for k, v in request.settings.items()}
            await self._authorize_change(context, bool(changes))
            logging = self.state.logging
            settings = logging.update(changes) if changes else logging.settings
            response = pb.LogSettingsResponse()
            for key, value in settings.as_dict().items():
                setattr(response.settings[key], _LOG_FIELDS[type(value)], value)
            return response
        return await self._run(context, work())

    async def TraceSetting(self, request, context):
        async def work():
            model = request.model_name or None
            changes = {k: _trace_value(k, list(v.value)) for k, v in request.settings.items()}
            await self._authorize_change(context, bool(changes))
            if model is not None:
                self.state.model(model)
            tracer = self.state.tracer
            settings = tracer.update(changes, model) if changes else tracer.settings(model)
            response = pb.TraceSettingResponse()
            for key, value in settings.items():
                response.settings[key].value.extend(value if isinstance(value, list) else [value])
            return response
        return await self._run(context, work())

    async def SystemSharedMemoryStatus(self, request, context):
        async def work():
            await self._authorize_change(context, False)
            response = pb.SystemSharedMemoryStatusResponse()
            for region in self.state.shm.status(request.name or None):
                response.regions[region["name"]].CopyFrom(
                    pb.SystemSharedMemoryStatusResponse.RegionStatus(**region))
            return response
        return await self._run(context, work())

    async def SystemSharedMemoryRegister(self, request, context):
        async def work():
            await self._authorize_change(context, True)
            self.state.shm.register(request.name, request.key, request.offset, request.byte_size)
            return pb.SystemSharedMemoryRegisterResponse()
        return await self._run(context, work())

    async def SystemSharedMemoryUnregister(self, request, context):
        async def work():
            await self._authorize_change(context, True)
            self.state.shm.unregister(request.name or None)
            return pb.SystemSharedMemoryUnregisterResponse()
        return await self._run(context, work())


def _setting(value) -> Any:
    which = value.WhichOneof("parameter_choice")
    return getattr(value, which) if which else None


def _trace_value(key: str, values: list[str]) -> Any:
    """An empty value clears a model's own setting (Triton's gRPC); trace_level keeps its list."""
    if not values:
        return None
    return values if key == "trace_level" else values[0]


def _cuda(name: str):
    async def method(self, request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name}: {CUDA_REFUSAL}")
    method.__name__ = name
    return method


for _name in ("CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister"):
    setattr(ExtensionRPCs, _name, _cuda(_name))

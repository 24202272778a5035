"""`inference.GRPCInferenceService` on grpc.aio, over the stubs tritonclient ships.

ModelStreamInfer is decoupled: every request on the stream runs as its own task and may answer many
times; each response echoes the request id. Cancelling the stream cancels the tasks, which closes their
generations (the engine aborts them).

API keys: every RPC that names or lists models checks the `authorization` metadata (`Bearer KEY`) with the
gate, in the task that then runs the request (the gate's token charge follows the request's context);
ServerLive, ServerReady and ServerMetadata stay open, as /v2/health/* and GET /v2 do. RepositoryModelLoad
and RepositoryModelUnload also need the `admin` role (PERMISSION_DENIED without it).
"""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

import grpc
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from conch.engine.errors import EngineError
from conch.engine.tensors.llm import tensor_model
from conch.gateway.auth import Gate
from conch.gateway.grpc.extensions import ExtensionRPCs
from conch.engine.tensors.classification import classified
from conch.gateway.grpc.convert import (StreamResponses, class_counts, requested_outputs, status_of, to_infer_request,
                                  to_infer_response)
from conch.gateway.kserve import metadata
from conch.gateway.kserve.infer import single_response
from conch.gateway.kserve.repository import load_model, public_index
from conch.gateway.kserve.state import TritonState

async def _guard(context: grpc.aio.ServicerContext, work):
    """Run `work`; an engine error ends the call with its status code and message."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        code, message = status_of(exc)
        await context.abort(code, message)


def _authorization(context: grpc.aio.ServicerContext) -> str | None:
    return next((v for k, v in context.invocation_metadata() or () if k == "authorization"), None)


class InferenceService(ExtensionRPCs, service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, state: TritonState, gate: Gate | None = None) -> None:
        self.state, self.gate = state, gate

    async def _authorize(self, authorization: str | None, model: str | None) -> None:
        """Raises Unauthorized, ModelNotFound (a model the key may not use) or RateLimited."""
        if self.gate is not None:
            await self.gate.check(authorization, model or None)

    async def _authorize_change(self, context: grpc.aio.ServicerContext, changes: bool) -> None:
        """A key that may use the API; one with the `admin` role to change a setting or a region."""
        await self._authorize(_authorization(context), None)
        if changes and self.gate is not None:
            self.gate.require(_authorization(context), "admin")

    async def _run(self, context: grpc.aio.ServicerContext, work):
        return await _guard(context, work)

    async def _authorize_control(self, authorization: str | None, model: str) -> None:
        """As `_authorize`, and the key must be an admin's."""
        await self._authorize(authorization, model)
        if self.gate is not None:
            self.gate.require(authorization, "admin")

    # -- health and metadata --------------------------------------------------------------------------
    async def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=self.state.engine.ready())

    async def ModelReady(self, request, context):
        async def work():
            try:
                await self._authorize(_authorization(context), request.name)
                loaded = self.state.model(request.name, request.version or None)
            except EngineError:
                return pb.ModelReadyResponse(ready=False)
            return pb.ModelReadyResponse(ready=self.state.engine.ready(loaded.name, loaded.config.version))
        return await _guard(context, work())

    async def ServerMetadata(self, request, context):
        return pb.ServerMetadataResponse(**metadata.server_metadata())

    async def ModelMetadata(self, request, context):
        async def work():
            await self._authorize(_authorization(context), request.name)
            model = self.state.model(request.name, request.version or None)
            data = metadata.model_metadata(model, self.state.engine.versions(model.name))
            return json_format.ParseDict(data, pb.ModelMetadataResponse())
        return await _guard(context, work())

    async def ModelConfig(self, request, context):
        async def work():
            await self._authorize(_authorization(context), request.name)
            model = self.state.model(request.name, request.version or None)
            return pb.ModelConfigResponse(config=metadata.model_config(model))
        return await _guard(context, work())

    async def ModelStatistics(self, request, context):
        async def work():
            await self._authorize(_authorization(context), request.name)
            data = metadata.model_statistics(self.state, request.name or None, request.version or None)
            return json_format.ParseDict(data, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)
        return await _guard(context, work())

    # -- the repository extension -----------------------------------------------------------------------
    async def RepositoryIndex(self, request, context):
        await _guard(context, self._authorize(_authorization(context), None))
        await _guard(context, self.state.control.refresh())
        states = public_index(self.state.control.index(ready_only=request.ready))
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**s) for s in states])

    async def RepositoryModelLoad(self, request, context):
        async def work():
            await self._authorize_control(_authorization(context), request.model_name)
            config = request.parameters["config"].string_param if "config" in request.parameters else None
            await load_model(self.state, request.model_name, config or None)
        await _guard(context, work())
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request, context):
        async def work():
            await self._authorize_control(_authorization(context), request.model_name)
            params = request.parameters
            dependents = "unload_dependents" in params and params["unload_dependents"].bool_param
            await self.state.control.unload(request.model_name, unload_dependents=dependents)
        await _guard(context, work())
        return pb.RepositoryModelUnloadResponse()

    # -- inference ------------------------------------------------------------------------------------
    async def ModelInfer(self, request, context):
        async def work():
            await self._authorize(_authorization(context), request.model_name)
            infer = to_infer_request(request, self.state.shm)
            outputs = await single_response(self.state, request.model_name, request.model_version or None, infer)
            model = self.state.model(request.model_name, request.model_version or None)
            outputs = classified(model, outputs, class_counts(request))
            return to_infer_response(outputs, model.name, model.config.version, request.id,
                                     requested_outputs(request), shm=self.state.shm)
        return await _guard(context, work())

    async def ModelStreamInfer(self, request_iterator, context) -> AsyncIterator[pb.ModelStreamInferResponse]:
        # The queue stays (measured: writing from each request's task with context.write instead cost more CPU
        # per response on both ends, though fewer instructions under callgrind): it lets a request's task run
        # ahead of the wire while the previous response is being sent.
        out: asyncio.Queue = asyncio.Queue()
        tasks: set[asyncio.Task] = set()
        authorization = _authorization(context)

        async def read() -> None:
            async for request in request_iterator:
                task = asyncio.create_task(self._stream_one(request, authorization, out.put_nowait))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.gather(*list(tasks), return_exceptions=True)
            out.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (item := await out.get()) is not None:
                yield item
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    async def _stream_one(self, request: pb.ModelInferRequest, authorization: str | None,
                          put: Callable[[pb.ModelStreamInferResponse], None]) -> None:
        """One request of a stream (checked and run in its own task): its responses, then (if asked) an empty
        final one; or an error."""
        try:
            await self._authorize(authorization, request.model_name)
            infer = to_infer_request(request, self.state.shm)
            model = self.state.model(request.model_name, request.model_version or None)
            replies = StreamResponses(model.name, model.config.version, request.id, requested_outputs(request),
                                      self.state.shm)
            responses = tensor_model(self.state.engine, model.name, model.config.version).infer(infer)
            counts = class_counts(request)
            try:
                async for outputs in responses:
                    put(replies.response(classified(model, outputs, counts)))
            finally:
                await responses.aclose()
            if infer.parameters.get("triton_enable_empty_final_response"):
                put(replies.response({}, final=True))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _, message = status_of(exc)
            put(pb.ModelStreamInferResponse(
                error_message=message, infer_response=pb.ModelInferResponse(model_name=request.model_name,
                                                                            id=request.id)))


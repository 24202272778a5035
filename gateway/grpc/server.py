"""The grpc.aio server beside the HTTP app (port 8001 by default), started and stopped in its lifespan."""
from __future__ import annotations

import grpc
from tritonclient.grpc import service_pb2_grpc

from conch.gateway.auth import Gate
from conch.gateway.grpc.service import InferenceService
from conch.gateway.kserve.state import TritonState

_OPTIONS = [("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.max_receive_message_length", 64 * 1024 * 1024)]


async def start_grpc(state: TritonState, host: str, port: int, gate: Gate | None = None,
                     interceptors: tuple = ()) -> grpc.aio.Server:
    server = grpc.aio.server(options=_OPTIONS, interceptors=interceptors)
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(state, gate), server)
    if server.add_insecure_port(f"{host}:{port}") == 0:
        raise OSError(f"gRPC could not bind {host}:{port}")
    await server.start()
    return server


async def stop_grpc(server: grpc.aio.Server) -> None:
    await server.stop(grace=2)

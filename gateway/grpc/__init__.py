"""Triton's face over gRPC: KServe v2 `inference.GRPCInferenceService`."""
from conch.gateway.grpc.server import start_grpc, stop_grpc

__all__ = ["start_grpc", "stop_grpc"]

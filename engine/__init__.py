"""Triton's role: model repository, scheduling and batching, backends."""
from engine.engine import Engine
from engine.types import GenerationDelta, GenerationRequest, RequestStatus, SamplingParams

__all__ = ["Engine", "GenerationDelta", "GenerationRequest", "RequestStatus", "SamplingParams"]

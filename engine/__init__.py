"""Triton's role: model repository, scheduling and batching, backends.

The front door: what the gateway needs to turn a wire request into a typed one and run it.
"""
from conch.engine.engine import Engine
from conch.engine.loaded_model import LoadedModel
from conch.engine.errors import EngineError, InvalidRequest
from conch.engine.params import OutputConstraint, build_constraint, build_sampling, checked_sampling
from conch.engine.types import (
    ChatInput, GenerationDelta, GenerationRequest, ReasoningControl, RequestStatus, SamplingParams,
)

__all__ = ["ChatInput", "Engine", "EngineError", "GenerationDelta", "GenerationRequest", "InvalidRequest",
           "LoadedModel", "OutputConstraint", "ReasoningControl", "RequestStatus", "SamplingParams",
           "build_constraint", "build_sampling", "checked_sampling"]

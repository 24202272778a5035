"""What the Triton faces (HTTP /v2 and gRPC) share: the engine, model control and per-model statistics."""
from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from conch.engine.engine import Engine
from conch.engine.errors import InvalidRequest, ModelNotFound, ModelNotReady
from conch.engine.loaded_model import LoadedModel
from conch.engine.model_control import ModelControl
from conch.gateway.kserve.logging_settings import ServerLogging
from conch.gateway.kserve.shared_memory import SystemSharedMemory
from conch.gateway.kserve.stats import Statistics
from conch.gateway.kserve.tracing import Tracer

SERVER_NAME = "conch"
SERVER_VERSION = "0.1.0"
EXTENSIONS = ("model_repository", "model_repository(unload_dependents)",
              "schedule_policy", "model_configuration", "statistics", "binary_tensor_data", "parameters",
              "generate", "generate_stream", "system_shared_memory", "logging", "trace")


@dataclass
class TritonState:
    engine: Engine
    control: ModelControl
    statistics: Statistics = field(default_factory=Statistics)    # an engine observer (gateway/app.py)
    tracer: Tracer = field(default_factory=Tracer)                 # an engine observer too
    logging: ServerLogging = field(default_factory=ServerLogging)
    shm: SystemSharedMemory = field(default_factory=SystemSharedMemory)

    def model(self, name: str, version: str | None = None) -> LoadedModel:
        """The serving model; 404 for a model or version that is not there, 503 while loading or warming up
        (Engine.get's answer, as /v1's), 400 for an ensemble missing a step (Triton's)."""
        if not self.engine.versions(name):
            state = self.control.state(name)
            if state is not None and state.state == "UNAVAILABLE":
                raise ModelNotReady(f"model '{name}' is not ready: {state.reason}")
            if state is None or state.state != "LOADING":
                raise ModelNotFound(f"model '{name}' is not found")
        missing = self.engine.missing_steps(name)
        if missing:        # Triton's answer (400) for a model with no available version
            raise InvalidRequest(f"Request for unknown model: '{name}' has no available versions: ensemble "
                                 f"step(s) {', '.join(missing)} not loaded", param="model")
        return self.engine.get(name, version)      # ModelNotReady while it loads or warms up


def triton_state(request: Request) -> TritonState:
    return request.app.state.triton

"""Server and model metadata, readiness, config and statistics as KServe v2 and Triton define them.
One function per answer, shared by the HTTP routes and the gRPC service."""
from __future__ import annotations

from conch.engine.loaded_model import LoadedModel
from conch.engine.tensors.contract import tensor_interface
from conch.engine.tensors.triton_config import to_triton
from conch.gateway.auth import may_use
from conch.gateway.kserve.state import EXTENSIONS, SERVER_NAME, SERVER_VERSION, TritonState


def server_metadata() -> dict:
    return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": list(EXTENSIONS)}


def model_metadata(model: LoadedModel, versions: list[str]) -> dict:
    inputs, outputs = tensor_interface(model.config)
    return {
        "name": model.name,
        "versions": versions,
        "platform": _platform(model),
        "inputs": [t.as_metadata() for t in inputs],
        "outputs": [t.as_metadata() for t in outputs],
    }


def model_config(model: LoadedModel):
    """Triton's ModelConfig message (tritonclient's protobuf)."""
    return to_triton(model.config)


def model_statistics(state: TritonState, name: str | None, version: str | None) -> dict:
    if name and version:
        models = [state.model(name, version)]
    elif name:
        state.model(name)                                          # 404 / 503 for a model not served
        models = [m for m in state.engine.all_versions() if m.name == name]
    else:
        models = [m for m in state.engine.all_versions() if may_use(m.name)]
    return {"model_stats": [state.statistics.of(m.name, m.config.version).as_dict(m) for m in models]}


def _platform(model: LoadedModel) -> str:
    return "ensemble" if model.config.backend == "ensemble" else model.config.backend

"""Server and model metadata, readiness, config and statistics as KServe v2 and Triton define them.
One function per answer, shared by the HTTP routes and the gRPC service."""
from __future__ import annotations

from engine.loaded_model import LoadedModel
from engine.tensors.contract import tensor_interface
from engine.tensors.triton_config import to_triton
from gateway.auth import may_use
from gateway.kserve.state import EXTENSIONS, SERVER_NAME, SERVER_VERSION, TritonState


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
    return {"model_stats": [_stats(state, m) for m in models]}


def _stats(state: TritonState, model: LoadedModel) -> dict:
    s = state.stats_for(model.name, model.config.version)
    zero = {"count": 0, "ns": 0}
    return {
        "name": model.name, "version": model.config.version, "last_inference": s.last_inference_ms,
        "inference_count": s.success.count, "execution_count": s.success.count,
        "inference_stats": {"success": {"count": s.success.count, "ns": s.success.ns},
                            "fail": {"count": s.fail.count, "ns": s.fail.ns}, "queue": zero,
                            "compute_input": zero, "compute_infer": {"count": s.success.count, "ns": s.success.ns},
                            "compute_output": zero, "cache_hit": zero, "cache_miss": zero},
        "batch_stats": [],
    }


def _platform(model: LoadedModel) -> str:
    return "ensemble" if model.config.backend == "ensemble" else model.config.backend

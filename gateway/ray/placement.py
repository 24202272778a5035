"""Where each model of the repository runs under Ray.

- **On replicas of its own deployment** (gateway/ray/model.py): the models that compute -- an LLM (the own
  engine, also as Triton's `tensorrt_llm` step with `conch_backend`, vLLM, TensorRT-LLM, an upstream).
- **In every ingress replica**, beside the faces: the repository's glue -- ensembles, Python models (their BLS
  calls included) and the tokenizer / detokenizer steps -- as Triton runs its ensemble scheduler and Python
  stubs beside the server. An ensemble's steps and a Python model's BLS requests resolve other models through
  the engine they run in; the ingress engine holds every model (the computing ones as their deployments'
  handles, gateway/ray/remote.py), so they resolve exactly as in one process, and a BLS call to the LLM
  streams from its replicas. They scale with `--ingress-replicas`.
- Embedding models run in the ingress replicas too, for now: /v1/embeddings validates and tokenizes through
  the backend's own methods (engine/embedding.py), which no remote backend offers yet.
"""
from __future__ import annotations

from conch.engine.errors import InvalidRequest
from conch.engine.repository import ModelConfig

INGRESS_BACKENDS = frozenset({"ensemble", "python", "tokenizer", "detokenizer", "embedding"})


def in_ingress(config: ModelConfig) -> bool:
    """True for a model that runs in the ingress replicas (no deployment of its own); InvalidRequest naming
    the model when its config asks for replicas of its own (`parameters.ray`)."""
    if config.backend not in INGRESS_BACKENDS:
        return False
    if config.parameters.get("ray"):
        raise InvalidRequest(f"model '{config.name}' ({config.backend} backend) runs in the ingress replicas on "
                             f"Ray, without a deployment of its own: remove its parameters.ray (scale it with "
                             f"--ingress-replicas)", param="config")
    return True

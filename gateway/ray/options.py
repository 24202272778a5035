"""A model's Ray Serve deployment options, read from its config's `parameters.ray` (opaque to the engine).

    parameters:
      ray:
        num_replicas: 2                      # or autoscaling_config (not both)
        autoscaling_config: {min_replicas: 1, max_replicas: 4, target_ongoing_requests: 8}
        ray_actor_options: {num_cpus: 1, num_gpus: 0}
        max_ongoing_requests: 32             # default: the model's max_batch_size
        multiplex_group: small               # models naming one group share its replicas (serve.multiplexed)
        max_models_per_replica: 3            # the group's LRU bound per replica

`conch serve --ray --replicas N` overrides num_replicas (and drops autoscaling) for every model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.repository import ModelConfig

_KEYS = frozenset({"num_replicas", "autoscaling_config", "ray_actor_options", "max_ongoing_requests",
                   "multiplex_group", "max_models_per_replica"})
_DEFAULT_ACTOR = {"num_cpus": 1}


@dataclass(frozen=True)
class DeploymentOptions:
    num_replicas: int = 1
    autoscaling_config: dict[str, Any] | None = None
    ray_actor_options: dict[str, Any] = field(default_factory=lambda: dict(_DEFAULT_ACTOR))
    max_ongoing_requests: int = 16
    multiplex_group: str | None = None
    max_models_per_replica: int = 3

    @property
    def max_replicas(self) -> int:
        """The most replicas the deployment may run (the ingress admits that many replicas' batches)."""
        if self.autoscaling_config is not None:
            return int(self.autoscaling_config.get("max_replicas", 1))
        return self.num_replicas

    def serve_options(self) -> dict[str, Any]:
        """Keyword arguments for `Deployment.options`."""
        scale = {"autoscaling_config": self.autoscaling_config} if self.autoscaling_config is not None \
            else {"num_replicas": self.num_replicas}
        return {**scale, "ray_actor_options": dict(self.ray_actor_options),
                "max_ongoing_requests": self.max_ongoing_requests}


def deployment_options(config: ModelConfig, replicas: int | None = None,
                       actor: dict[str, Any] | None = None) -> DeploymentOptions:
    """The model's options; `replicas` (the CLI's --replicas) and `actor` (defaults for ray_actor_options)
    apply over the config. Raises InvalidRequest naming the key for anything unknown or out of range."""
    raw = config.parameters.get("ray") or {}
    if not isinstance(raw, dict):
        raise InvalidRequest(f"model '{config.name}': parameters.ray must be a mapping", param="config")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InvalidRequest(f"model '{config.name}': unknown parameters.ray keys {unknown}", param="config")
    if "num_replicas" in raw and "autoscaling_config" in raw:
        raise InvalidRequest(f"model '{config.name}': parameters.ray takes num_replicas or autoscaling_config, "
                             f"not both", param="config")
    values = {"max_ongoing_requests": config.max_batch_size, **raw,
              "ray_actor_options": {**_DEFAULT_ACTOR, **(actor or {}), **raw.get("ray_actor_options", {})}}
    if replicas is not None:
        values.update(num_replicas=replicas, autoscaling_config=None)
    options = DeploymentOptions(**values)
    if options.num_replicas < 1 or options.max_ongoing_requests < 1 or options.max_models_per_replica < 1:
        raise InvalidRequest(f"model '{config.name}': parameters.ray counts must be >= 1", param="config")
    return options

"""The Ray Serve application: one deployment per model (or per multiplexed group) and the ingress over them.

`build` is the import path a `serve run` / `serve deploy` config names (examples/ray/serve_config.yaml);
`conch serve --ray` calls `application` with the command line's settings (gateway/ray/run.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ray import serve

from conch.engine.repository import ModelRepository
from conch.gateway.ray.ingress import Ingress
from conch.gateway.ray.model import ModelServer
from conch.gateway.ray.multiplex import ModelGroup
from conch.gateway.ray.options import DeploymentOptions, deployment_options
from conch.gateway.ray.placement import in_ingress
from conch.gateway.ray.router import ROUTER_PATHS
from conch.gateway.ray.settings import RaySettings


def build(args: dict[str, Any]) -> serve.Application:
    """`serve run gateway.ray.app:build repository=...`, or a config file's `args`."""
    return application(RaySettings.from_args(dict(args)))


def application(settings: RaySettings) -> serve.Application:
    options = model_options(settings)
    handles: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for name, opts in options.items():
        if opts.multiplex_group is not None:
            groups.setdefault(opts.multiplex_group, []).append(name)
            continue
        handles[name] = ModelServer.options(  # type: ignore[attr-defined]  # a Deployment, typed as the class
            name=f"model-{name}", **opts.serve_options(), **router_options(settings)).bind(
            settings.repository, name, settings.max_queue_size)
    for group, names in groups.items():
        opts = options[names[0]]         # a group's first model (by name) carries its deployment options
        bound = ModelGroup.options(  # type: ignore[attr-defined]  # a Deployment, typed as the class
            name=f"group-{group}", **opts.serve_options()).bind(
            settings.repository, opts.max_models_per_replica, settings.max_queue_size)
        handles.update(dict.fromkeys(names, bound))
    settings = replace(settings, max_replicas=tuple((n, o.max_replicas) for n, o in options.items()),
                       multiplexed=tuple(n for names in groups.values() for n in names))
    return Ingress.options(  # type: ignore[attr-defined]  # a Deployment, typed as the class
        name="ingress", num_replicas=settings.ingress_replicas, max_ongoing_requests=settings.ingress_max_ongoing,
        ray_actor_options={"num_cpus": settings.ingress_cpus}).bind(settings, handles)


def router_options(settings: RaySettings) -> dict[str, Any]:
    """A model deployment's request router (gateway/ray/router.py), or none for Ray's default (pow2)."""
    path = ROUTER_PATHS.get(settings.routing)
    if path is None:
        return {}
    slack = settings.routing == "affinity" and settings.affinity_slack is not None
    kwargs = {"slack": settings.affinity_slack} if slack else {}
    return {"request_router_config": {"request_router_class": path, "request_router_kwargs": kwargs}}


def model_options(settings: RaySettings) -> dict[str, DeploymentOptions]:
    """The deployment options of every model that runs on replicas of its own (gateway/ray/placement.py)."""
    repository = ModelRepository(settings.repository)
    actor = {"num_cpus": settings.model_cpus} if settings.model_cpus is not None else None
    configs = [repository.config(name) for name in repository.names()]
    return {config.name: deployment_options(config, settings.replicas, actor)
            for config in configs if not in_ingress(config)}

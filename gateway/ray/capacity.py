"""The fleet's CPU needs against the cluster's, checked at start: Ray does not refuse a deployment it cannot
place, its replicas only wait to be scheduled (with warnings in the log), so `conch serve --ray --replicas 2`
with the default repository on a 2-core machine never became ready. Refused here instead, with the flags
that fit."""
from __future__ import annotations

from conch.gateway.ray.options import DeploymentOptions
from conch.gateway.ray.settings import RaySettings


class FleetTooLarge(Exception):
    """The application's replicas need more CPUs than the cluster has; the message names flags that fit."""


def start_replicas(opts: DeploymentOptions) -> int:
    """Replicas the deployment starts with (an autoscaled one: its min_replicas, at least 1)."""
    if opts.autoscaling_config is not None:
        return max(1, int(opts.autoscaling_config.get("min_replicas", 1)))
    return opts.num_replicas


def fleet_cpus(settings: RaySettings, options: dict[str, DeploymentOptions]) -> tuple[float, int]:
    """(CPUs the application needs to start, model replicas it starts); a multiplex group counts once."""
    seen_groups: set[str] = set()
    cpus, replicas = settings.ingress_replicas * settings.ingress_cpus, 0
    for opts in options.values():
        if opts.multiplex_group is not None:
            if opts.multiplex_group in seen_groups:
                continue
            seen_groups.add(opts.multiplex_group)
        count = start_replicas(opts)
        cpus += count * float(opts.ray_actor_options.get("num_cpus", 1))
        replicas += count
    return cpus, replicas


def check_fits(settings: RaySettings, options: dict[str, DeploymentOptions], available: float) -> None:
    """FleetTooLarge unless the fleet's CPUs fit in `available` (the cluster's CPU count)."""
    needed, replicas = fleet_cpus(settings, options)
    if needed <= available:
        return
    ingress = settings.ingress_replicas * settings.ingress_cpus
    per_model = (available - ingress) / replicas if replicas else 0.0
    hints = [f"--ray-num-cpus {int(needed + 0.999)} (if the machine has the cores)"]
    if per_model > 0:
        hints.insert(0, f"--ray-model-cpus {per_model:.2g}")
    if settings.replicas is not None and settings.replicas > 1:
        hints.insert(0, "--replicas 1")
    raise FleetTooLarge(
        f"conch serve --ray: the application needs {needed:g} CPUs ({replicas} model replica(s) and "
        f"{settings.ingress_replicas} ingress replica(s) at {settings.ingress_cpus:g}) but the Ray cluster has "
        f"{available:g}; its replicas would wait to be scheduled forever. Try {' or '.join(hints)}.")

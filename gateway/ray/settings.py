"""What `conch serve --ray` (or a `serve run` config's args) tells the application. Plain values only: the
settings travel to every replica."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROUTINGS = ("affinity", "round-robin", "pow2")  # how the ingress picks a model replica (docs/ray.md, Session affinity)

@dataclass(frozen=True)
class RaySettings:
    repository: str | tuple[str, ...] | None = None   # the model repositories: folders or s3://, gs://, as://
                                                      # URLs (None: the embedded SmolLM2)
    replicas: int | None = None              # every model's num_replicas (None: each config's parameters.ray)
    ingress_replicas: int = 1
    ingress_cpus: float = 1.0
    ingress_max_ongoing: int = 256          # requests one ingress replica takes at once (Ray's default, 5,
                                             # would queue a c16 load at the proxy: TTFT x10 in bench_ray)
    model_cpus: float | None = None          # default num_cpus of a model replica (parameters.ray may override)
    routing: str = "affinity"                # one of ROUTINGS: a session's turns to its replica, each replica
                                             # in turn, or Ray's default
    affinity_slack: int | None = None        # requests the affine replica may run beyond the least loaded one's
                                             # (None: its max_ongoing_requests, affinity.py)
    response_cache: str | None = None        # memory | redis://... (redis: shared by every ingress replica)
    rate_limits: str = "memory"              # memory | redis://... (redis: one limit across ingress replicas)
    rate_limits_fallback: str = "local"      # while Redis is down: local (1/ingress_replicas each), open, closed
    response_store: str = "memory"           # memory | redis://... (redis: stored responses shared by replicas)
    response_store_ttl: float = 30 * 24 * 3600.0
    response_store_mb: float = 256.0
    api_keys: tuple[str, ...] = ()
    admin_keys: tuple[str, ...] = ()
    api_keys_file: str | None = None
    max_queue_size: int | None = None
    metrics: bool = True
    grpc_port: int | None = None             # served by the ingress (one ingress replica per node: one port)
    mcp_servers: str | None = None           # the faces' flags, as `conch serve` takes them (docs/mcp.md,
    mcp_allow_origin: tuple[str, ...] = ()   # docs/anthropic.md); the MCP file must be at this path on every
    mcp_loop_timeout: float | None = None    # node that runs an ingress replica
    model_alias: tuple[str, ...] = ()
    image_allow_origin: tuple[str, ...] = ()  # where image URLs may be fetched from, and the bounds (--image-*,
    image_max_bytes: int | None = None        # docs/vision.md): each ingress replica fetches its requests'
    image_fetch_timeout: float | None = None
    keep_billing_header: bool = False
    hosted_tools: str = "drop"
    trace_config: tuple[str, ...] = ()       # --trace-config entries, as given: each ingress replica exports its
                                             # own spans (docs/tracing.md, On Ray)
    max_replicas: tuple[tuple[str, int], ...] = ()   # filled by the builder: model -> its most replicas
    multiplexed: tuple[str, ...] = ()                # filled by the builder: models served by a group

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> "RaySettings":
        """From a `serve run` config's `args` (lists become tuples); unknown keys are refused by name."""
        known = set(cls.__dataclass_fields__) - {"max_replicas", "multiplexed"}
        unknown = sorted(set(args) - known)
        if unknown:
            raise ValueError(f"conch ray args: unknown keys {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}
        return cls(**values)

    def __post_init__(self) -> None:
        if self.routing not in ROUTINGS:
            raise ValueError(f"conch ray: routing must be one of {list(ROUTINGS)}, not {self.routing!r}")
        if self.affinity_slack is not None and self.affinity_slack < 0:
            raise ValueError("conch ray: affinity_slack must be >= 0")

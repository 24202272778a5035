"""The ingress deployment: the same FastAPI app as `conch serve`, over an Engine whose backends are the
model deployments (gateway/ray/remote.py). Keys, rate limits, the response cache and the record store (stored
responses and conversations) live here, in Redis when the settings say so, so that every ingress replica
shares them.

Every HTTP response carries `x-conch-replica` (the model replicas that generated it, comma-separated, in
order; the ingress replica when no model replica was involved: a cache hit, /health, an error before
generation) and `x-conch-ingress` (the ingress replica that answered).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conch.engine.response_cache import open_cache
from conch.engine.engine import Engine
from conch.engine.repository import ModelConfig, ModelRepository
from conch.engine.repository.repository import RepositoryRoots
from conch.gateway.ray.model import replica_id
from conch.gateway.ray.remote import RemoteBackends, served_by
from conch.gateway.ray.settings import RaySettings


class FannedOutRepository(ModelRepository):
    """The repository as the ingress sees it: a model's batch is all its replicas' batches, so that the
    ingress admission queue lets through what the replicas can run (each replica still queues its own)."""

    def __init__(self, root: RepositoryRoots, replicas: dict[str, int]) -> None:
        super().__init__(root)
        self.replicas = replicas

    def config(self, name: str, version: str | None = None, override: Any = None) -> ModelConfig:
        config = super().config(name, version, override)
        n = self.replicas.get(name, 1)
        return replace(config, max_batch_size=config.max_batch_size * n) if n > 1 else config


class ReplicaHeader:
    """Pure ASGI (no task of its own), so the list it puts in `served_by` is the one the route fills."""

    def __init__(self, app: ASGIApp, ingress: str) -> None:
        self.app, self.ingress = app, ingress.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        replicas: list[str] = []
        token = served_by.set(replicas)

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                named = ",".join(dict.fromkeys(replicas)).encode() or self.ingress
                message = {**message, "headers": [*message.get("headers", []), (b"x-conch-replica", named),
                                                  (b"x-conch-ingress", self.ingress)]}
            await send(message)

        try:
            await self.app(scope, receive, send_named)
        finally:
            served_by.reset(token)


@serve.deployment
@serve.ingress()
class Ingress:
    """`handles`: model name -> its deployment (a ModelServer, or the ModelGroup it is multiplexed in)."""

    def __init__(self, settings: RaySettings, handles: dict[str, DeploymentHandle]) -> None:
        self.settings, self.handles = settings, handles

    def __serve_build_asgi_app__(self) -> ASGIApp:
        from conch.gateway.app import build_app
        from conch.gateway.auth import Gate, KeyRing
        from conch.gateway.limits import open_limiter
        from conch.gateway.records import open_records

        s = self.settings
        repository = FannedOutRepository(s.repository, dict(s.max_replicas))
        engine = Engine(repository, cache=open_cache(s.response_cache), max_queue_size=s.max_queue_size,
                        backends=RemoteBackends(self.handles, frozenset(s.multiplexed)))
        keys = KeyRing.load(list(s.api_keys), Path(s.api_keys_file) if s.api_keys_file else None,
                            list(s.admin_keys))
        limiter = open_limiter(s.rate_limits, s.rate_limits_fallback, s.ingress_replicas)
        gate = Gate(keys, limiter) if not keys.open else None
        records = open_records(s.response_store, s.response_store_ttl, s.response_store_mb)
        app = build_app(engine, faces_settings(s), load=repository.names(), gate=gate, metrics=s.metrics,
                        grpc_port=s.grpc_port, records=records)
        app.add_middleware(ReplicaHeader, ingress=replica_id())
        return app


def faces_settings(s: RaySettings) -> Any:
    """The faces' settings of one ingress replica, from the command line's flags as RaySettings carries them."""
    from conch.agents.mcp import McpConfig
    from conch.gateway.aliases import ModelAliases
    from conch.gateway.conversation.images import ImagePolicy
    from conch.gateway.state import Settings
    from conch.gateway.telemetry import TraceConfig

    return Settings(mcp=McpConfig.from_flags(s.mcp_servers, s.mcp_allow_origin, s.mcp_loop_timeout),
                    aliases=ModelAliases.parse(list(s.model_alias)), keep_billing_header=s.keep_billing_header,
                    hosted_tools=s.hosted_tools, trace_config=TraceConfig.parse(list(s.trace_config)),
                    images=ImagePolicy.of(s.image_allow_origin, max_bytes=s.image_max_bytes,
                                          timeout_s=s.image_fetch_timeout))

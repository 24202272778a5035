"""Which server a request's `mcp` tool reaches, and which of its tools may be offered: the one place the
admin's registry, the origin policy and the key's grants meet.

    offer = await config.resolve(McpToolRequest("calc", allowed_tools=frozenset({"add"})), key="team-a")

A tool is offered only if every filter allows it: the request's `allowed_tools`, the registered server's
`allowed_tools` and the key's grant (None at a level: no limit there).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import urlsplit

from conch.agents.mcp.approval import ApprovalRule
from conch.agents.mcp.policy import OriginPolicy, refused
from conch.agents.mcp.registry import McpRegistry
from conch.agents.mcp.types import Limits, McpTool, ServerTarget, Transport


@dataclass(frozen=True)
class McpToolRequest:
    """A request's `{"type": "mcp", ...}` tool, validated at the wire; `headers` are for this request only."""

    server_label: str
    server_url: str | None = None
    allowed_tools: frozenset[str] | None = None
    approval: ApprovalRule = field(default_factory=ApprovalRule)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False, hash=False)


@dataclass(frozen=True)
class ServerOffer:
    """A server the loop may use for one request: how to reach it, which tools it may offer, which need
    approval."""

    target: ServerTarget
    tool_filter: frozenset[str] | None = None
    approval: ApprovalRule = field(default_factory=ApprovalRule)

    @property
    def label(self) -> str:
        return self.target.label

    def offered(self, tools: Sequence[McpTool]) -> tuple[McpTool, ...]:
        return tuple(t for t in tools if self.tool_filter is None or t.name in self.tool_filter)


@dataclass(frozen=True)
class McpConfig:
    """The gateway's MCP settings (app state): registered servers, allowed origins, limits."""

    registry: McpRegistry = field(default_factory=McpRegistry)
    origins: OriginPolicy = field(default_factory=OriginPolicy)      # the CLI's --mcp-allow-origin
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_flags(cls, servers: str | Path | None = None, allow_origins: Sequence[str] = (),
                   loop_timeout_s: float | None = None) -> "McpConfig":
        """From `conch serve`'s --mcp-servers FILE, --mcp-allow-origin (each) and --mcp-loop-timeout (None:
        the default); OSError or ValueError naming what in the flags or the file is wrong."""
        registry = McpRegistry.load(servers) if servers else McpRegistry()
        if loop_timeout_s is not None and loop_timeout_s <= 0:
            raise ValueError("--mcp-loop-timeout must be positive")
        limits = Limits() if loop_timeout_s is None else Limits(loop_timeout_s=loop_timeout_s)
        return cls(registry=registry, origins=OriginPolicy.of(allow_origins), limits=limits)

    @property
    def policy(self) -> OriginPolicy:
        return self.origins.merged(self.registry.origins)

    async def resolve(self, request: McpToolRequest, key: str | None) -> ServerOffer:
        """The offer for `request` made with API key `key` (its name; None on an open server), or
        McpFailure(REFUSED) naming what is not allowed."""
        registered = self.registry.servers.get(request.server_label)
        if request.server_url is None:
            if registered is None:
                raise refused(f"server_label {request.server_label!r} names no MCP server registered on this "
                              "gateway; give a server_url")
            tools = _narrowest(request.allowed_tools, registered.allowed_tools,
                               self.registry.grants.tools(key, registered.label))
            target = registered.target()
            headers = {**request.headers, **target.headers}            # the admin's headers win
            return ServerOffer(_with_headers(target, headers), tools, request.approval)
        if registered is not None:
            raise refused(f"server_label {request.server_label!r} is a registered MCP server: omit server_url")
        origin = await self.policy.check(request.server_url)
        tools = _narrowest(request.allowed_tools, self.registry.grants.tools(key, origin))
        transport = Transport.SSE if urlsplit(request.server_url).path.rstrip("/").endswith("/sse") \
            else Transport.STREAMABLE_HTTP
        target = ServerTarget(request.server_label, transport, request.server_url, headers=dict(request.headers),
                              metric_name=origin)
        return ServerOffer(target, tools, request.approval)


def _narrowest(*filters: frozenset[str] | None) -> frozenset[str] | None:
    result = None
    for f in filters:
        if f is not None:
            result = f if result is None else result & f
    return result


def _with_headers(target: ServerTarget, headers: Mapping[str, str]) -> ServerTarget:
    return ServerTarget(target.label, target.transport, target.url, target.command, headers, target.metric_name,
                        target.env)

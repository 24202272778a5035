"""Which MCP servers a request may make Conch reach: the admin's origins, the addresses they resolve to, and
each key's servers and tools.

A `server_url` from a request passes only if (1) its origin (scheme, host, port; no userinfo) is one the admin
listed exactly, and (2) every address its host resolves to is public, unless the admin listed that origin as
private or named the address itself (an IP literal or `localhost`). Redirects are the transports' business:
they follow only same-origin ones (agents/mcp/client.py), so (1) holds for every request Conch sends.
Between the check and the connect a hostile DNS server could answer differently (rebinding); list private
servers by IP literal where that matters.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from conch.agents.mcp.types import FailureKind, McpFailure

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LITERAL_LOCAL = {"localhost"}


def origin_of(url: str) -> str:
    """`scheme://host[:port]`, lower-cased, the default port dropped. ValueError for a URL without one, or one
    carrying credentials (they would be echoed and stored with the tool)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("an MCP server URL may not carry credentials (send them in headers)")
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    port = parts.port
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != _DEFAULT_PORTS[parts.scheme] else "")


def refused(reason: str) -> McpFailure:
    return McpFailure(FailureKind.REFUSED, reason)


@dataclass(frozen=True)
class OriginPolicy:
    """The admin's allow-list. `private` holds the listed origins that may resolve to non-public addresses."""

    allowed: frozenset[str] = frozenset()
    private: frozenset[str] = frozenset()

    @classmethod
    def of(cls, public: Iterable[str] = (), private: Iterable[str] = ()) -> "OriginPolicy":
        public_set, private_set = {origin_of(o) for o in public}, {origin_of(o) for o in private}
        return cls(frozenset(public_set | private_set), frozenset(private_set))

    def merged(self, other: "OriginPolicy") -> "OriginPolicy":
        return OriginPolicy(self.allowed | other.allowed, self.private | other.private)

    async def check(self, url: str) -> str:
        """The URL's origin if Conch may reach it; McpFailure(REFUSED) naming why not."""
        try:
            origin = origin_of(url)
        except ValueError as exc:
            raise refused(str(exc)) from None
        if origin not in self.allowed:
            raise refused(f"server_url origin {origin} is not in the gateway's MCP allow-list")
        host = urlsplit(url.strip()).hostname or ""
        if origin in self.private or host.lower() in _LITERAL_LOCAL or _is_literal(host):
            return origin                          # the admin named this address (or its network) itself
        for address in await _resolve(host):
            if not _public(address):
                raise refused(f"server_url host {host} resolves to a non-public address ({address})")
        return origin


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def _resolve(host: str) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise refused(f"server_url host {host} does not resolve ({exc.strerror or exc})") from None
    return sorted({info[4][0] for info in infos})


@dataclass(frozen=True)
class Grant:
    """One key's MCP servers (registered labels or allow-listed origins) and, per server, its tools
    (None: every tool the server lists)."""

    servers: Mapping[str, frozenset[str] | None] = field(default_factory=dict)

    def tools(self, server: str) -> frozenset[str] | None:
        if server not in self.servers and "*" not in self.servers:
            raise refused(f"this API key may not use the MCP server {server}")
        return self.servers.get(server, self.servers.get("*"))


@dataclass(frozen=True)
class KeyGrants:
    """Grants by key name; `restricted` False (no `keys` section) lets every key use every server."""

    by_key: Mapping[str, Grant] = field(default_factory=dict)
    restricted: bool = False

    def tools(self, key: str | None, server: str) -> frozenset[str] | None:
        """The tools `key` may use on `server` (None: all); McpFailure(REFUSED) if it may use none."""
        if not self.restricted:
            return None
        grant = self.by_key.get(key or "*") or self.by_key.get("*")
        if grant is None:
            raise refused(f"this API key may not use the MCP server {server}")
        return grant.tools(server)

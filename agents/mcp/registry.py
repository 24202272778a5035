"""The admin's MCP servers, read from `conch serve --mcp-servers FILE` (YAML or JSON):

    allow_origins:                      # request server_urls Conch may reach (also --mcp-allow-origin)
      - https://mcp.example.com
      - {origin: "http://mcp.internal:8080", private: true}     # may resolve to a private address
    servers:
      calc:                             # the label requests name it by (no server_url needed)
        url: http://127.0.0.1:9000/mcp
        transport: streamable_http      # or sse (older servers); a `command` means stdio
        headers_from_env: {Authorization: CALC_AUTH}   # header -> environment variable holding its value
        allowed_tools: [add, lookup]    # the tools any request may use (default: all)
      files:
        command: [python, -m, files_server]
        env_from_env: {FILES_TOKEN: FILES_TOKEN}       # the stdio process's environment, from Conch's
    keys:                               # by API key name (gateway/auth.py); absent: every key, every server
      team-a: {calc: [add], files: "*"}
      "*": {calc: [lookup]}             # any other key (and an open server)

Secrets stay in the environment: the file names variables, and their values are read when a session opens.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from conch.agents.mcp.policy import Grant, KeyGrants, OriginPolicy
from conch.agents.mcp.types import FailureKind, McpFailure, ServerTarget, Transport


@dataclass(frozen=True)
class RegisteredServer:
    label: str
    transport: Transport
    url: str | None = None
    command: tuple[str, ...] = ()
    headers_from_env: Mapping[str, str] = field(default_factory=dict)   # header -> variable name
    env_from_env: Mapping[str, str] = field(default_factory=dict)       # stdio variable -> Conch's variable
    allowed_tools: frozenset[str] | None = None

    def target(self) -> ServerTarget:
        """The server as one session reaches it, its secrets read from the environment now."""
        return ServerTarget(self.label, self.transport, self.url, self.command,
                            headers=_from_env(self.label, self.headers_from_env),
                            env=_from_env(self.label, self.env_from_env))


def _from_env(label: str, names: Mapping[str, str]) -> dict[str, str]:
    missing = sorted(v for v in names.values() if v not in os.environ)
    if missing:
        raise McpFailure(FailureKind.UNREACHABLE, f"MCP server {label}: environment variable(s) "
                                                  f"{', '.join(missing)} not set on the gateway")
    return {key: os.environ[var] for key, var in names.items()}


@dataclass(frozen=True)
class McpRegistry:
    servers: Mapping[str, RegisteredServer] = field(default_factory=dict)
    grants: KeyGrants = field(default_factory=KeyGrants)
    origins: OriginPolicy = field(default_factory=OriginPolicy)

    @classmethod
    def load(cls, path: Path | str) -> "McpRegistry":
        """The file's servers, key grants and origins; ValueError naming the entry that is wrong."""
        text = Path(path).read_text()
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
        return cls.from_mapping(data or {})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "McpRegistry":
        unknown = sorted(set(data) - {"allow_origins", "servers", "keys"})
        if unknown:
            raise ValueError(f"MCP servers file: unknown section(s) {unknown}")
        servers = {label: _server(str(label), spec) for label, spec in (data.get("servers") or {}).items()}
        keys = data.get("keys")
        grants = KeyGrants({str(k): _grant(str(k), v) for k, v in (keys or {}).items()}, keys is not None)
        return cls(servers, grants, _origins(data.get("allow_origins") or []))


def _server(label: str, spec: Any) -> RegisteredServer:
    if not isinstance(spec, dict):
        raise ValueError(f"MCP server {label}: expected a mapping")
    unknown = sorted(set(spec) - {"url", "transport", "command", "headers_from_env", "env_from_env",
                                  "allowed_tools"})
    if unknown:
        raise ValueError(f"MCP server {label}: unknown field(s) {unknown}")
    command = spec.get("command") or ()
    command = tuple(command.split() if isinstance(command, str) else command)
    kinds = {t.value for t in Transport} - {Transport.STDIO.value}
    if not command and spec.get("transport", "streamable_http") not in kinds:
        raise ValueError(f"MCP server {label}: transport {spec['transport']!r} is not one of {sorted(kinds)}")
    transport = Transport.STDIO if command else Transport(spec.get("transport", "streamable_http"))
    tools = spec.get("allowed_tools")
    server = RegisteredServer(label, transport, spec.get("url"), command, dict(spec.get("headers_from_env") or {}),
                              dict(spec.get("env_from_env") or {}),
                              frozenset(tools) if tools is not None else None)
    ServerTarget(label, transport, server.url, command)          # raises on a url/command mismatch
    missing = sorted(v for v in (*server.headers_from_env.values(), *server.env_from_env.values())
                     if v not in os.environ)
    if missing:
        raise ValueError(f"MCP server {label}: environment variable(s) {', '.join(missing)} not set")
    return server


def _grant(key: str, spec: Any) -> Grant:
    if not isinstance(spec, dict):
        raise ValueError(f"MCP keys.{key}: expected a mapping of server -> tool list or \"*\"")
    return Grant({str(server): None if tools in ("*", None) else frozenset(tools) for server, tools in spec.items()})


def _origins(entries: list[Any]) -> OriginPolicy:
    public = [e for e in entries if isinstance(e, str)]
    private = [e["origin"] for e in entries if isinstance(e, dict) and e.get("private")]
    public += [e["origin"] for e in entries if isinstance(e, dict) and not e.get("private")]
    return OriginPolicy.of(public, private)

"""What the library tells an observer about each MCP call; the gateway registers the Prometheus series."""
from __future__ import annotations

from typing import Protocol


class CallObserver(Protocol):
    def on_mcp_call(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        """One tools/call ended. `server` is a registered label or an allow-listed origin and `tool` a name
        that server listed, so the label sets stay bounded; `outcome` is "ok", a FailureKind value or
        "cancelled"."""

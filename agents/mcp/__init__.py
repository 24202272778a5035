"""MCP tools run by the gateway: sessions with MCP servers (client.py), which servers a request may reach
(policy.py, registry.py, access.py), and the loop that runs a model's MCP calls until it answers (loop.py).

The front door holds the light names only: `agents.mcp.loop` and `agents.mcp.client` import the mcp SDK
(seconds), so a face imports them where it runs a loop, and a server without MCP tools never pays for it.
"""
from conch.agents.mcp.access import McpConfig, McpToolRequest, ServerOffer
from conch.agents.mcp.approval import ApprovalRule
from conch.agents.mcp.policy import OriginPolicy
from conch.agents.mcp.registry import McpRegistry
from conch.agents.mcp.types import Limits, McpFailure, McpTool

__all__ = ["ApprovalRule", "Limits", "McpConfig", "McpFailure", "McpRegistry", "McpTool", "McpToolRequest",
           "OriginPolicy", "ServerOffer"]

"""A request's MCP servers, resolved before anything runs: which servers it may reach (the admin's registry,
origin allow-list and the key's grants: agents/mcp/access.py), the tools each listed earlier in the
conversation, and the approvals its input answers. Whatever the policy refuses is a 400 naming the tool's
field, before a byte goes to any MCP server."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from conch.agents.mcp import McpConfig, McpFailure, McpTool, ServerOffer
from conch.agents.mcp.events import Approval
from conch.gateway.errors import APIError
from conch.gateway.openai.responses.mcp_items import approvals, known_tools
from conch.gateway.openai.responses.mcp_tools import WireMcpTool
from conch.gateway.openai.responses.tools import ResponseTools


@dataclass(frozen=True)
class McpPlan:
    offers: tuple[ServerOffer, ...]
    approvals: tuple[Approval, ...]                  # the answers that end the input: the loop resumes with them
    known: Mapping[str, tuple[McpTool, ...]]         # listed earlier in this conversation: not listed again
    params: Mapping[str, str]                        # server label -> the field a refusal names

    @property
    def resumes(self) -> bool:
        return bool(self.approvals)


async def plan_mcp(tools: ResponseTools, context: list[dict[str, Any]], first_new: int, config: McpConfig,
                   key: str | None) -> McpPlan:
    """`context` is the stored head then this request's input (from index `first_new`); `key` the caller's key
    name (None on an open server)."""
    labels = [t.request.server_label for t in tools.mcp]
    if len(set(labels)) != len(labels):
        index = next(t.index for k, t in enumerate(tools.mcp) if t.request.server_label in labels[:k])
        raise APIError(400, f"tools[{index}].server_label repeats another mcp tool's label",
                       param=f"tools.{index}.server_label")
    offers = await resolve_offers(config, tools.mcp, key)
    choice = tools.tool_choice
    if isinstance(choice, dict):
        _check_named_choice(choice["function"]["name"], offers, {t["function"]["name"] for t in tools.tools})
    params = {t.request.server_label: _field(t) for t in tools.mcp}
    return McpPlan(offers, approvals(context, first_new), known_tools(context), params)


async def resolve_offers(config: McpConfig, tools: Sequence[WireMcpTool], key: str | None) -> tuple[ServerOffer, ...]:
    offers = []
    for tool in tools:
        try:
            offers.append(await config.resolve(tool.request, key))
        except McpFailure as failure:
            raise refusal(_field(tool), failure.reason) from None
    return tuple(offers)


def refusal(param: str, reason: str) -> APIError:
    return APIError(400, f"{param.replace('.', '[', 1).replace('.', '].', 1)}: MCP server refused: {reason}",
                    param=param, code="mcp_server_refused")


def _field(tool: WireMcpTool) -> str:
    return f"tools.{tool.index}." + ("server_url" if tool.request.server_url is not None else "server_label")


def _check_named_choice(name: str, offers: Sequence[ServerOffer], function_names: set[str]) -> None:
    """A tool_choice naming a tool no filter lets this request use is a 400: the model could never call it."""
    if name in function_names:
        return
    if not any(o.tool_filter is None or name in o.tool_filter for o in offers):
        raise APIError(400, f"tool_choice names tool '{name}', which no mcp tool of this request may use "
                            "(its allowed_tools, the server's or the key's list)", param="tool_choice")

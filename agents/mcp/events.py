"""What the MCP loop reports, in order, and what it ends with. The Responses face turns these into
`mcp_list_tools` / `mcp_call` / `mcp_approval_request` items and `response.mcp_*` events; nothing here knows
HTTP. Arguments are the model's JSON text; outputs are bounded text (agents/mcp/output.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Union

from conch.agents.mcp.types import CallOutput, FailureKind, McpTool


@dataclass(frozen=True)
class McpCall:
    id: str                  # the item's id (mcp_...) or, for a call waiting for approval, the request's
    server_label: str
    name: str
    arguments: str           # JSON text, as the model wrote it


@dataclass(frozen=True)
class ToolCallRequest:
    """A call the model made in one turn (any tool: MCP or the client's own function)."""

    name: str
    arguments: str
    call_id: str = ""


@dataclass(frozen=True)
class ModelTurn:
    content: str = ""
    calls: tuple[ToolCallRequest, ...] = ()


@dataclass(frozen=True)
class CallRecord:
    """A finished MCP call as the next turn's prompt shows it: its output, or why there is none."""

    call: McpCall
    output: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class TurnInput:
    """What the loop asks of one model turn: the MCP tools it may call now (empty once max_tool_calls is
    spent) and every MCP call of this loop so far, oldest first."""

    tools: tuple[McpTool, ...]
    records: tuple[CallRecord, ...]


@dataclass(frozen=True)
class Approval:
    """The client's answer to an approval request (the call as it was requested)."""

    call: McpCall
    approve: bool
    reason: str | None = None


# -- events, in the order the loop emits them --

@dataclass(frozen=True)
class ListToolsInProgress:
    server_label: str


@dataclass(frozen=True)
class ListToolsCompleted:
    server_label: str
    tools: tuple[McpTool, ...]


@dataclass(frozen=True)
class ListToolsFailed:
    server_label: str
    error: str
    kind: FailureKind = FailureKind.UNREACHABLE      # REFUSED: the policy (or a redirect) said no


@dataclass(frozen=True)
class CallInProgress:
    call: McpCall


@dataclass(frozen=True)
class CallArguments:
    call: McpCall            # its arguments are final: the face writes them as delta(s) then done


@dataclass(frozen=True)
class CallCompleted:
    call: McpCall
    output: CallOutput


@dataclass(frozen=True)
class CallFailed:
    call: McpCall
    error: str
    kind: FailureKind = FailureKind.TOOL_ERROR


@dataclass(frozen=True)
class ApprovalRequested:
    call: McpCall            # call.id is the approval request's id


@dataclass(frozen=True)
class TurnDone:
    turn: ModelTurn          # a model turn ended (its MCP calls follow as Call* events)


LoopEvent = Union[ListToolsInProgress, ListToolsCompleted, ListToolsFailed, CallInProgress, CallArguments,
                  CallCompleted, CallFailed, ApprovalRequested, TurnDone]


class Ending(str, Enum):
    ANSWERED = "answered"                # the last turn called no MCP tool (it may have called functions)
    APPROVAL = "approval"                # a call waits for the client's approval
    TIMEOUT = "timeout"                  # the loop's time ran out
    MAX_TURNS = "max_turns"              # the model kept calling tools past Limits.max_turns
    FAILED = "failed"                    # a session broke under the loop (LoopOutcome.error says how)


@dataclass(frozen=True)
class LoopOutcome:
    ending: Ending
    last_turn: ModelTurn | None = None   # its function calls (not MCP) return to the client
    records: tuple[CallRecord, ...] = ()
    pending: tuple[McpCall, ...] = ()    # approval requests, when ending is APPROVAL
    tools: dict[str, tuple[McpTool, ...]] = field(default_factory=dict)   # offered, by server label
    error: str | None = None

    @property
    def function_calls(self) -> tuple[ToolCallRequest, ...]:
        if self.last_turn is None:
            return ()
        mcp = {t.name for tools in self.tools.values() for t in tools}
        return tuple(c for c in self.last_turn.calls if c.name not in mcp)

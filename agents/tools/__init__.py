"""Tool calling's values: the tools offered, the calls parsed, the streamed deltas, and their assembly. The
formats that write and read calls (prompt, grammar, parser) are agents/tool_formats/."""
from conch.agents.tools.assemble import StreamContractError, assemble
from conch.agents.tools.types import (
    ContentDelta,
    ParsedOutput,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolFunction,
    new_call_id,
)

__all__ = [
    "ContentDelta",
    "ParsedOutput",
    "StreamContractError",
    "StreamEvent",
    "ToolCall",
    "ToolCallDelta",
    "ToolFunction",
    "assemble",
    "new_call_id",
]

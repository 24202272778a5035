"""Tool calling: the values (tools offered, calls parsed, streamed deltas) and the per-model parsers that
turn model text into content and OpenAI-shaped tool calls, whole or incrementally."""
from agents.tools.assemble import StreamContractError, assemble
from agents.tools.parsers import DEFAULT_PARSER, ToolParser, get_parser, parser_names
from agents.tools.types import (
    ContentDelta,
    ParsedOutput,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolFunction,
    new_call_id,
)

__all__ = [
    "DEFAULT_PARSER",
    "ContentDelta",
    "ParsedOutput",
    "StreamContractError",
    "StreamEvent",
    "ToolCall",
    "ToolCallDelta",
    "ToolFunction",
    "ToolParser",
    "assemble",
    "get_parser",
    "new_call_id",
    "parser_names",
]

"""One path for the chat-like faces (/v1/chat/completions, /v1/responses, /v1/messages): each face reads its
wire body into a `Conversation` (OpenAI chat's shapes, as plain values), `build_generation` turns it into one
engine request (tool plan, chat template, grammar, sampling; or the messages themselves for an upstream that
renders its own), and an `OutputReader` turns the engine's text back into content and tool-call events that
the face writes in its own shapes. A new sampling parameter, tool format or structured-output kind is added
here once for all three faces."""
from conch.gateway.conversation.output import OutputReader
from conch.gateway.conversation.request import build_generation, count_prompt_tokens
from conch.gateway.conversation.tools import ToolPlan, plan_tools
from conch.gateway.conversation.types import Conversation, WirePaths

__all__ = ["Conversation", "OutputReader", "ToolPlan", "WirePaths", "build_generation", "count_prompt_tokens",
           "plan_tools"]

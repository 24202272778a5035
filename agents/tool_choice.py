"""What a request's `tool_choice` asks of the output, and the finish_reason rule that follows from it.

    none      -> the tools are not even rendered; plain text
    auto      -> no grammar: the model may answer in prose or call; calls are parsed afterwards
    required  -> one to `max_calls` calls of any listed tool, enforced by the format's grammar
    function  -> exactly one call of the named function, enforced by the format's grammar
"""
from __future__ import annotations

from dataclasses import dataclass

from conch.engine.types import RequestStatus

DEFAULT_MAX_PARALLEL_TOOL_CALLS = 4


@dataclass(frozen=True)
class ToolChoice:
    mode: str                    # "none" | "auto" | "required" | "function"
    function: str | None = None  # the named function, for mode "function"

    @property
    def forced(self) -> bool:
        """The output is calls only, enforced by a grammar."""
        return self.mode in ("required", "function")

    def final_status(self, status: RequestStatus, has_calls: bool) -> RequestStatus:
        """OpenAI's rule: FINISHED_TOOL_CALLS ("tool_calls") when the model chose to call (auto, required); a
        named choice is the caller's decision, so it stays FINISHED_STOPPED ("stop"). Other ends pass through;
        RequestStatus.finish_reason is the one map to OpenAI's words."""
        if status == RequestStatus.FINISHED_STOPPED and has_calls and self.mode != "function":
            return RequestStatus.FINISHED_TOOL_CALLS
        return status

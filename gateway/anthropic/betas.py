"""The `anthropic-beta` header: what each beta Conch knows means here. Every value is accepted (Claude Code adds
betas with each release; refusing one would break a client that works). A value not in KNOWN is named back in
the `conch-ignored-betas` response header and logged once per process, so an ignored beta is never silent."""
from __future__ import annotations

import logging

from fastapi import Request

log = logging.getLogger(__name__)

IGNORED_HEADER = "conch-ignored-betas"

# beta -> what it means on this server (docs/anthropic.md repeats this table)
KNOWN: dict[str, str] = {
    "claude-code-20250219": "names the client; changes nothing",
    "context-management-2025-06-27": "context_management edits are applied (gateway/anthropic/context_edits.py)",
    "interleaved-thinking-2025-05-14": "thinking between tool calls: as the thinking field is served",
    "thinking-token-count-2026-05-13": "thinking tokens counted: as the thinking field is served",
    "redact-thinking-2026-02-12": "thinking display: as the thinking field is served",
    "advanced-tool-use-2025-11-20": "tool fields defer_loading, input_examples, allowed_callers: accepted, "
                                    "every tool is offered at once",
    "fine-grained-tool-streaming-2025-05-14": "tool input streams as it is generated (always)",
    "structured-outputs-2025-11-13": "output_format / output_config.format: enforced by grammar",
    "token-counting-2024-11-01": "count_tokens (always served)",
    "prompt-caching-2024-07-31": "cache_control accepted; the prefix cache keeps every prompt's KV",
    "prompt-caching-scope-2026-01-05": "cache_control scopes accepted; the prefix cache keeps every prompt's KV",
    "extended-cache-ttl-2025-04-11": "cache_control ttl accepted; KV is kept while memory allows",
    "output-128k-2025-02-19": "max_tokens is a ceiling: what the context leaves",
    "effort-2025-11-24": "output_config.effort: accepted",
    "oauth-2025-04-20": "OAuth bearer keys: Conch's own keys apply",
    "per-turn-control-2026-07-01": "system messages inside messages: rendered in their place",
    "mid-conversation-tool-changes-2026-07-01": "tools may change between turns: each request renders its own",
}
_logged: set[str] = set()          # bounded by LOG_AT_MOST: a client cannot grow it without end
LOG_AT_MOST = 256


def unknown_betas(request: Request) -> list[str]:
    """The request's beta values Conch does not know, in the order sent (logged the first time seen)."""
    values = [v.strip() for header in request.headers.getlist("anthropic-beta") for v in header.split(",")]
    unknown = [v for v in values if v and v not in KNOWN]
    for value in unknown:
        if value not in _logged and len(_logged) < LOG_AT_MOST:
            _logged.add(value)
            log.info("anthropic-beta %r is not one Conch knows: accepted, changes nothing", value)
    return unknown


def beta_headers(request: Request) -> dict[str, str]:
    unknown = unknown_betas(request)
    return {IGNORED_HEADER: ", ".join(unknown)} if unknown else {}

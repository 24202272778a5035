"""POST /v1/responses/compact: the served model summarizes the conversation so far, and the summary comes back
sealed (gateway/sealed.py) in a `compaction` item only this deployment can read back. The compacted output is
what a client sends next in place of its history (Codex CLI's remote compaction):

    output   the input's user messages, verbatim, then {"type": "compaction", "id", "encrypted_content"}

A `compaction` item in a later request's input is rendered as one user message: items.py's SUMMARY_PREFIX, then
the summary; an item this deployment did not seal (or one altered) is a 400 naming it."""
from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from fastapi import Request

from conch.gateway.conversation import build_generation
from conch.gateway.choices import collect
from conch.gateway.openai.responses.items import COMPACTION_KIND
from conch.gateway.openai.responses.run import Prepared, TurnExtras, conversation
from conch.gateway.sealed import seal
from conch.gateway.state import conch_state
from conch.gateway.streaming import until_disconnect

MAX_SUMMARY_TOKENS = 1024          # unless the request's max_output_tokens says otherwise (the context bounds both)
INSTRUCTION = ("Summarize the conversation above for yourself to continue it later: the task, what has been done, "
               "the files and facts that matter, and what remains. Write only the summary.")


def compaction_item(summary: str) -> dict[str, Any]:
    return {"type": "compaction", "id": f"cmp_{uuid.uuid4().hex}",
            "encrypted_content": seal(COMPACTION_KIND, summary)}


async def compact(p: Prepared, request: Request, use_cache: bool) -> dict[str, Any]:
    conv = conversation(p, use_cache, TurnExtras(messages=({"role": "user", "content": INSTRUCTION},),
                                                 tool_choice="none"))
    limit = p.body.max_output_tokens or MAX_SUMMARY_TOKENS
    conv = replace(conv, sampling=replace(conv.sampling, max_tokens=limit), stream=False)
    engine = conch_state(request).engine
    gen, _ = await build_generation(conv, engine, p.response_id)
    (choice,) = await until_disconnect(request, collect(engine.generate(gen), 1))
    kept = [item for item in p.context if item["type"] == "message" and item["role"] == "user"]
    return {"id": p.response_id, "object": "response.compaction", "created_at": int(time.time()),
            "output": kept + [compaction_item(choice.content)],
            "usage": {"input_tokens": choice.prompt_tokens, "output_tokens": choice.completion_tokens,
                      "total_tokens": choice.prompt_tokens + choice.completion_tokens,
                      "input_tokens_details": {"cached_tokens": choice.cached_tokens},
                      "output_tokens_details": {"reasoning_tokens": 0}}}

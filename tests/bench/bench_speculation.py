"""Issue 33: multi-token decode steps on agent workloads, at concurrency 1, SmolLM2-135M bf16 (the default
model and config), one in-process server, speculation switched off and on between requests.

Workloads (tests/bench/agent_workloads.py): tool_call (a forced call, 6-field schema), quote (a reply quoting
a ~600-token tool result), code_edit (a 40-line function rewritten), json (response_format json_schema), and
chat, the control: free prose (ignore_eos), which must not get slower. Each request runs greedy with
CONCH_BENCH_SPEC_TOKENS new tokens at most (default 128), once to warm its prompt's KV (both modes then find
it in the slot the last run left), then CONCH_BENCH_SPEC_ROUNDS times (default 3) in each mode, alternating.
Printed per workload: tokens/s off and on (completion tokens over wall time, the median round), the ratio,
the output's tokens, and the proposals accepted of those made (the backend's counters, also in /metrics).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import openai

from conch.engine.backends.conch.speculation import Speculation
from conch.engine.weights import DEFAULT_MODEL_ID
from tests.bench.agent_workloads import workloads
from tests.conftest import start_inprocess, write_repository

MAX_TOKENS = int(os.environ.get("CONCH_BENCH_SPEC_TOKENS", "128"))
ROUNDS = int(os.environ.get("CONCH_BENCH_SPEC_ROUNDS", "3"))
CHAT = {"messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper and a storm."}],
        "extra_body": {"ignore_eos": True}}


def timed(client: openai.OpenAI, kwargs: dict, model: str = DEFAULT_MODEL_ID) -> tuple[float, int]:
    """(seconds, completion tokens) of one greedy request."""
    start = time.perf_counter()
    r = client.chat.completions.create(model=model, max_tokens=MAX_TOKENS, temperature=0, **kwargs)
    return time.perf_counter() - start, r.usage.completion_tokens


def _measure(client: openai.OpenAI, scheduler, kwargs: dict, on: Speculation) -> dict[str, float]:
    timed(client, kwargs)                                            # its prompt's KV stays in the slot
    rates: dict[str, list[float]] = {"off": [], "on": []}
    proposed, accepted, tokens = scheduler.proposed_tokens, scheduler.accepted_tokens, 0
    for _ in range(ROUNDS):
        for mode in ("off", "on"):
            scheduler.speculation = on if mode == "on" else Speculation(0)
            seconds, tokens = timed(client, kwargs)
            rates[mode].append(tokens / seconds)
    scheduler.speculation = on
    off, spec = statistics.median(rates["off"]), statistics.median(rates["on"])
    return {"off tok/s": off, "on tok/s": spec, "ratio": spec / off, "tokens": tokens,
            "accepted": scheduler.accepted_tokens - accepted, "proposed": scheduler.proposed_tokens - proposed}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_repository(Path(tmp), {DEFAULT_MODEL_ID: {"weights": "builtin:smollm2"}})
        server = start_inprocess(root, timeout=900)
        try:
            client = openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=3600)
            timed(client, CHAT)                                       # waits for the load
            scheduler = server.engine.get(DEFAULT_MODEL_ID).backend.scheduler
            on = scheduler.speculation
            print(f"speculation: {on}; max_tokens {MAX_TOKENS}, {ROUNDS} rounds, c1", flush=True)
            for name, kwargs in {**workloads(), "chat": CHAT}.items():
                f = _measure(client, scheduler, kwargs, on)
                print(f"{name:10} off {f['off tok/s']:6.1f} tok/s  on {f['on tok/s']:6.1f} tok/s  "
                      f"{f['ratio']:.2f}x  ({f['tokens']:.0f} tokens; accepted {f['accepted']:.0f} of "
                      f"{f['proposed']:.0f} proposed, {ROUNDS} runs)", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()

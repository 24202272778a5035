"""Issue 31's figure: the gateway's own time per MCP call, outside the model and the MCP server.

The same 3-call workload two ways, on one server, rounds alternating (the order flipping each round), medians
reported so background load hits both alike:
1. Responses: three requests chained by `previous_response_id`, each with the `mcp` tool (the test server's
   `add`, require_approval never), tool_choice naming `add` and max_tool_calls 1, so each runs the gateway's
   loop once: a forced model turn, the MCP call, an answering turn (ANSWER_TOKENS).
2. A client's loop over chat completions: per call, a chat request forcing `add`, the call made by the client
   with the mcp package's own client over one session, and a chat request for the answer; the history resent.
Both ask with the same words and the same bounds: the forced call turn up to CALL_TOKENS, the answer in the
same JSON schema (a few tokens, ended by the grammar); the tokens each side generated are printed, so a gap in
model work shows. The response cache is off on both (`Cache-Control: no-cache`): every round repeats a request.
Figures: per call, (Responses wall time - the chat loop's model requests - the chat loop's MCP calls), the
gateway's time outside the model and the MCP server (goal <= 5 ms); and the Responses loop against the whole
client loop (a client pays HTTP round trips and its own MCP session on top).
"""
from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from conch.engine.weights import DEFAULT_MODEL_ID as MODEL
from tests.conftest import start_server, write_repository
from tests.mcp_servers import start

CALLS = 3
ROUNDS = 5
CALL_TOKENS = 48          # enough for the forced call's markup and arguments
ANSWER_TOKENS = 24        # a bound the answer's grammar ends well before
QUESTION = "What is 2 plus 3? Use the add tool."
ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
SUM = {"name": "answer", "strict": True, "schema": {"type": "object", "properties": {"sum": {"type": "integer"}},
                                                    "required": ["sum"], "additionalProperties": False}}
NO_CACHE = {"Cache-Control": "no-cache"}


async def _responses(client: httpx.AsyncClient, mcp_url: str) -> tuple[float, int]:
    """(wall time, output tokens) of CALLS chained responses, each one gateway loop with one MCP call."""
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_url, "allowed_tools": ["add"],
            "require_approval": "never"}
    previous, tokens, start = None, 0, time.perf_counter()
    for _ in range(CALLS):
        body = {"model": MODEL, "input": QUESTION, "tools": [tool], "max_tool_calls": 1, "temperature": 0,
                "tool_choice": {"type": "mcp", "server_label": "calc", "name": "add"},
                "text": {"format": {"type": "json_schema", **SUM}},
                "max_output_tokens": CALL_TOKENS, "previous_response_id": previous}
        reply = (await client.post("/v1/responses", json=body)).raise_for_status().json()
        assert any(item["type"] == "mcp_call" and item["status"] == "completed" for item in reply["output"]), reply
        previous, tokens = reply["id"], tokens + reply["usage"]["output_tokens"]
    return time.perf_counter() - start, tokens


async def _chat(client: httpx.AsyncClient, mcp_url: str) -> tuple[float, float, float, int]:
    """(wall time, time in chat requests, time in MCP calls, completion tokens) of the same loop run by a
    client."""
    messages: list[dict] = []
    model_s = mcp_s = 0.0
    tokens = [0]
    start = time.perf_counter()
    async with Client(streamable_http_client(mcp_url)) as session:
        for _ in range(CALLS):
            messages.append({"role": "user", "content": QUESTION})
            t = time.perf_counter()
            call = await _complete(client, messages, {"type": "function", "function": {"name": "add"}},
                                   CALL_TOKENS, tokens)
            model_s += time.perf_counter() - t
            tool_call = call["tool_calls"][0]
            t = time.perf_counter()
            result = await session.call_tool("add", json.loads(tool_call["function"]["arguments"]))
            mcp_s += time.perf_counter() - t
            content = result.content[0]
            assert isinstance(content, TextContent), content
            messages += [call, {"role": "tool", "tool_call_id": tool_call["id"], "content": content.text}]
            t = time.perf_counter()
            messages.append(await _complete(client, messages, "none", ANSWER_TOKENS, tokens,
                                            {"type": "json_schema", "json_schema": SUM}))
            model_s += time.perf_counter() - t
    return time.perf_counter() - start, model_s, mcp_s, tokens[0]


async def _complete(client: httpx.AsyncClient, messages: list[dict], choice, max_tokens: int, tokens: list[int],
                    response_format: dict | None = None) -> dict:
    body = {"model": MODEL, "messages": messages, "tools": [ADD], "tool_choice": choice, "temperature": 0,
            "max_tokens": max_tokens, "parallel_tool_calls": False, "response_format": response_format}
    reply = (await client.post("/v1/chat/completions", json=body)).raise_for_status().json()
    tokens[0] += reply["usage"]["completion_tokens"]
    message = reply["choices"][0]["message"]
    return {k: v for k, v in message.items() if v is not None}


async def _round(base: str, mcp_url: str, responses_first: bool) -> tuple[tuple[float, int], tuple[float, ...]]:
    async with httpx.AsyncClient(base_url=base, timeout=300, headers=NO_CACHE) as client:
        if responses_first:
            r = await _responses(client, mcp_url)
            return r, await _chat(client, mcp_url)
        c = await _chat(client, mcp_url)
        return await _responses(client, mcp_url), c


def main() -> None:
    tools = start("tools_server", "streamable-http")
    with tempfile.TemporaryDirectory(prefix="conch-bench-mcp-") as tmp:
        repo = write_repository(Path(tmp) / "repo", {MODEL: {"weights": "builtin:smollm2"}})
        server = start_server(["--model-repository", str(repo), "--log-level", "warning", "--mcp-allow-origin",
                               tools.origin, "--mcp-loop-timeout", "900"],    # a first turn's grammar, contended
                              Path(tmp))
        try:
            asyncio.run(_round(server.url, tools.url, True))                  # warm up
            rounds = [asyncio.run(_round(server.url, tools.url, i % 2 == 0)) for i in range(ROUNDS)]
        finally:
            server.stop()
            tools.stop()
    responses = statistics.median(r[0] for r, _ in rounds)
    chat = statistics.median(c[0] for _, c in rounds)
    model = statistics.median(c[1] for _, c in rounds)
    mcp = statistics.median(c[2] for _, c in rounds)
    outside = (responses - model - mcp) / CALLS
    print(f"{CALLS}-call MCP loop, medians of {ROUNDS} alternating rounds (SmolLM2, streamable HTTP add tool)")
    print(f"  tokens generated per loop: Responses {sorted({r[1] for r, _ in rounds})}, "
          f"chat {sorted({int(c[3]) for _, c in rounds})}")
    print(f"  Responses (gateway loop)  {responses * 1e3:8.1f} ms   client loop over chat {chat * 1e3:8.1f} ms   "
          f"ratio {responses / chat:5.3f}")
    print(f"  of the client loop: model requests {model * 1e3:8.1f} ms, MCP calls {mcp * 1e3:6.1f} ms")
    print(f"  gateway time outside the model and the MCP server: {outside * 1e3:+6.2f} ms per call (goal <= 5 ms)")


if __name__ == "__main__":
    main()

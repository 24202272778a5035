"""Issues 6 and 4: what constrained decoding costs, as ratios measured in the same run.

1. Tokens/s with a JSON schema vs without, at concurrency 1 and 16 (goal >= 0.95x), in-process engine,
   SmolLM2 bf16. The schema's strings are long enough that no request finishes before its token budget.
2. Compile time per library over the test schemas, cold and cached (goal: llguidance cold median <= 50 ms,
   cached <= 1 ms).
3. Time to first token of a constrained request vs an unconstrained one (goal <= 1.1x).
4. Time to first token with 20 tools (tool_choice required), cold (its grammar compiled in the request: the
   median of 5, each capping parallel calls differently) and warm (grammar cached), vs the same request
   without tools (goals: warm <= 1.2x, cold <= 2x). Both run with the tools' prompt head cached (in the
   prefix cache, or in the slot an earlier request left); every request asks its own question, so none finds
   its whole prompt there. The very first request with these tools, which prefills all of it, is printed too.
"""
from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from typing import Iterator

from conch.engine.engine import Engine
from conch.engine.weights import DEFAULT_MODEL_ID
from conch.engine.repository import ModelRepository
from conch.engine.types import GenerationRequest, SamplingParams
from conch.grammars import GrammarCompiler, GrammarError, JsonSchema, TokenizerInfo, available_libraries
from tests.grammars.schemas import SCHEMAS

NEW_TOKENS = 48
ROUNDS = 5
LONG_TEXT = {"type": "object", "properties": {"story": {"type": "string", "minLength": 400}}, "required": ["story"]}
_ids = iter(range(10**9))


def _request(ids, grammar=None, max_tokens=NEW_TOKENS) -> GenerationRequest:
    return GenerationRequest(id=f"s{next(_ids)}", model=DEFAULT_MODEL_ID, prompt_token_ids=tuple(ids), grammar=grammar,
                             params=SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True),
                             use_cache=False)


async def _tokens_per_s(engine, ids, grammar, concurrency: int, total: int) -> float:
    async def one() -> int:
        return sum([len(d.token_ids) async for d in engine.generate(_request(ids, grammar))])

    start = time.perf_counter()
    done = 0
    for _ in range(total // concurrency):
        done += sum(await asyncio.gather(*[one() for _ in range(concurrency)]))
    return done / (time.perf_counter() - start)


async def _ttft(engine, ids, grammar=None) -> float:
    start = time.perf_counter()
    async for d in engine.generate(_request(ids, grammar, max_tokens=1)):
        if d.token_ids:
            return time.perf_counter() - start
    return time.perf_counter() - start


async def _median_ttft(engine, prompts, grammar=None, runs: int = 5) -> float:
    """prompts: a list of ids (asked `runs` times) or an iterator of them (each run the next)."""
    take = (lambda: prompts) if isinstance(prompts, list) else (lambda: next(prompts))
    return statistics.median([await _ttft(engine, take(), grammar) for _ in range(runs)])


def _chat(tokenizer, text: str, tools=None) -> list[int]:
    from conch.agents.tool_formats import DEFAULT_FORMAT, get_format

    messages = get_format(DEFAULT_FORMAT).prompt([{"role": "user", "content": text}], tools or [])
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(prompt, add_special_tokens=False)


def _questions(tokenizer, tools=None) -> Iterator[list[int]]:
    """Chat prompts asking distinct questions (a slot that kept an earlier prompt gives only its head)."""
    return (_chat(tokenizer, f"Weather in city number {i}?", tools) for i in itertools.count())


def _twenty_tools():
    from conch.agents.tools import ToolFunction

    return [ToolFunction(f"tool_{i}", f"Tool number {i}", {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city"]}) for i in range(20)]


def compile_figures(tokenizer) -> None:
    info = TokenizerInfo.from_hf(tokenizer)
    for library in available_libraries():
        compiler, cold, warm = GrammarCompiler(info, library=library), [], []
        for case in SCHEMAS:
            spec = JsonSchema.from_dict(case.schema)
            try:
                t = time.perf_counter()
                compiler.compile(spec)
                cold.append(time.perf_counter() - t)
            except GrammarError:
                continue
            t = time.perf_counter()
            compiler.compile(spec)
            warm.append(time.perf_counter() - t)
        print(f"  compile {library:<11} {len(cold)} schemas: cold median {statistics.median(cold) * 1e3:7.2f} ms, "
              f"cached median {statistics.median(warm) * 1e3:6.3f} ms")


async def _run() -> None:
    from conch.agents.tool_choice import DEFAULT_MAX_PARALLEL_TOOL_CALLS, ToolChoice
    from conch.agents.tool_formats import DEFAULT_FORMAT, get_format

    engine = Engine(ModelRepository())
    await engine.start()
    tokenizer = engine.get(DEFAULT_MODEL_ID).tokenizer
    ids = _chat(tokenizer, "Write a long story as JSON.")
    schema = JsonSchema.from_dict(LONG_TEXT)
    await _tokens_per_s(engine, ids, schema, 2, 2)                                 # warm-up, compiles
    for c, total in ((1, 2), (16, 16)):
        ratios, free, constrained = [], [], []
        for _ in range(ROUNDS):  # free/constrained pairs back to back: background load hits both alike
            free.append(await _tokens_per_s(engine, ids, None, c, total))
            constrained.append(await _tokens_per_s(engine, ids, schema, c, total))
            ratios.append(constrained[-1] / free[-1])
        print(f"  c={c:<2} free {statistics.median(free):6.1f} tok/s, schema {statistics.median(constrained):6.1f} "
              f"tok/s: median pair ratio {statistics.median(ratios):4.2f}x (goal >= 0.95x)")
    # every KV slot used once, as in a server that has run a while: no request timed below pays for faulting
    # in a fresh slot's first pages (~7 ms of a 38-token prompt's step here)
    await asyncio.gather(*[_ttft(engine, ids) for _ in range(64)])
    free, constrained = await _median_ttft(engine, ids), await _median_ttft(engine, ids, schema)
    print(f"  ttft free {free * 1e3:6.1f} ms, schema {constrained * 1e3:6.1f} ms: {constrained / free:4.2f}x "
          "(goal <= 1.1x)")
    compile_figures(tokenizer)
    tools = _twenty_tools()
    plain, with_tools = _questions(tokenizer), _questions(tokenizer, tools)
    fmt, required = get_format(DEFAULT_FORMAT), ToolChoice("required")
    grammar = fmt.grammar(tools, required, DEFAULT_MAX_PARALLEL_TOOL_CALLS)
    first = await _ttft(engine, next(with_tools))              # nothing cached: the whole prompt is prefilled
    same_prompt = await _median_ttft(engine, with_tools)       # the tools' prompt head is now cached
    # each compiles its grammar in the request: the same 20 tools, another cap on parallel calls (a new key)
    cold = statistics.median([await _ttft(engine, next(with_tools), fmt.grammar(tools, required, calls))
                              for calls in (1, 2, 3, 5, 6)])
    warm = await _median_ttft(engine, with_tools, grammar)
    base = await _median_ttft(engine, plain)
    print(f"  20 tools: prompt {len(next(with_tools))} tokens vs {len(next(plain))} without tools")
    print(f"  ttft no tools {base * 1e3:6.1f} ms; 20 tools: first ever {first * 1e3:6.1f} ms (full prefill), "
          f"unconstrained {same_prompt * 1e3:6.1f} ms, cold grammar {cold * 1e3:6.1f} ms, warm {warm * 1e3:6.1f} ms")
    print(f"  warm / no tools {warm / base:5.2f}x (goal <= 1.2x), cold / no tools {cold / base:5.2f}x (goal <= 2x), "
          f"first ever / no tools {first / base:5.2f}x")
    await engine.stop()


def main() -> None:
    asyncio.run(_run())


if __name__ == "__main__":
    main()

"""The pipeline's detokenize step over a scripted generate step (token-id deltas) and SmolLM2's real tokenizer:
text equals the full decode, stop strings end a choice at once (truncated, usage counted, the backend told to
stop that choice), stop tokens never reach the text, held text is released at the end."""
from __future__ import annotations

import asyncio

import pytest
from transformers import AutoTokenizer

from conch.engine.weights import ensure_smollm2
from conch.engine.pipeline import detokenize
from conch.engine.types import (GenerationDelta, GenerationRequest, ReasoningControl, RequestStatus, SamplingParams,
                                Usage)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(ensure_smollm2())


class Scripted:
    """A generate step that streams given token ids, one delta per token, for each of n choices."""

    def __init__(self, tokenizer, choices: list[list[int]], final: RequestStatus = RequestStatus.FINISHED_LENGTH,
                 stop_reason=None) -> None:
        self.tokenizer, self.choices, self.final, self.stop_reason = tokenizer, choices, final, stop_reason
        self.aborted: list[tuple[str, int | None]] = []
        self.produced = 0

    async def abort(self, request_id: str, index: int | None = None) -> None:
        self.aborted.append((request_id, index))

    async def generate(self, request: GenerationRequest):
        longest = max(len(c) for c in self.choices)
        for step in range(longest):
            for index, ids in enumerate(self.choices):
                if step < len(ids):
                    self.produced += 1
                    last = step == len(ids) - 1
                    yield GenerationDelta(request.id, index, token_ids=(ids[step],),
                                          status=self.final if last else RequestStatus.RUNNING,
                                          usage=Usage(3, len(ids)) if last else None,
                                          stop_reason=self.stop_reason if last else None)


def run(backend: Scripted, reasoning: ReasoningControl | None = None, **params) -> list[GenerationDelta]:
    request = GenerationRequest("r", "m", prompt_token_ids=(1, 2, 3), reasoning=reasoning,
                                params=SamplingParams(max_tokens=100, n=len(backend.choices), **params))

    async def collect():
        return [d async for d in detokenize(backend, request, backend.generate(request))]
    return asyncio.run(collect())


def text_of(deltas, index: int = 0) -> str:
    return "".join(d.text for d in deltas if d.index == index)


def test_text_is_the_full_decode(tokenizer):
    ids = tokenizer.encode("naïve café — 東京 🚀 ok", add_special_tokens=False)
    deltas = run(Scripted(tokenizer, [ids]))
    assert text_of(deltas) == tokenizer.decode(ids)
    assert deltas[-1].finish_reason == "length" and deltas[-1].usage == Usage(3, len(ids))


def test_stop_string_ends_the_choice_and_truncates(tokenizer):
    ids = tokenizer.encode("one two END three four five", add_special_tokens=False)
    backend = Scripted(tokenizer, [ids])
    deltas = run(backend, stop=("END",))
    assert text_of(deltas) == "one two "
    last = deltas[-1]
    assert last.finish_reason == "stop" and last.stop_reason == "END"
    kept = sum(len(d.token_ids) for d in deltas)
    assert kept < len(ids) and tokenizer.decode(ids[:kept]).endswith("END")
    assert last.usage == Usage(3, kept)
    assert backend.produced == kept           # the step stopped reading the generate step at once


def test_include_stop_string(tokenizer):
    ids = tokenizer.encode("alpha STOP beta", add_special_tokens=False)
    assert text_of(run(Scripted(tokenizer, [ids]), stop=("STOP",), include_stop_str_in_output=True)) == "alpha STOP"


def test_one_choice_stopped_aborts_only_that_choice(tokenizer):
    short = tokenizer.encode("x END y z w v u", add_special_tokens=False)
    long = tokenizer.encode("a b c d e f g h i j k", add_special_tokens=False)
    backend = Scripted(tokenizer, [short, long])
    deltas = run(backend, stop=("END",))
    assert text_of(deltas, 0) == "x " and text_of(deltas, 1) == tokenizer.decode(long)
    assert backend.aborted == [("r", 0)]
    assert [d.index for d in deltas if d.finished] == [0, 1]


def test_stop_token_counts_but_is_not_text(tokenizer):
    ids = tokenizer.encode("hello", add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("!")]
    deltas = run(Scripted(tokenizer, [ids], RequestStatus.FINISHED_STOPPED, stop_reason=ids[-1]))
    assert text_of(deltas) == "hello" and deltas[-1].usage.completion_tokens == len(ids)


def test_held_back_text_is_released_at_the_end(tokenizer):
    ids = tokenizer.encode("ends with EN", add_special_tokens=False)
    deltas = run(Scripted(tokenizer, [ids]), stop=("END",))
    assert text_of(deltas) == "ends with EN" and deltas[-1].finish_reason == "length"


def test_a_stop_string_keeps_the_reasoning_tokens_in_usage(tokenizer):
    """The choice ends on a stop string while the backend still runs it: usage counts the thinking (the end
    text included) from the token ids, as the engine's reasoning gate does."""
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    start, thought, end, answer = encode("<think>"), encode(" plan it"), encode("</think>"), encode(" ok STOP more")
    control = ReasoningControl(tuple(start), tuple(end), tuple(end + encode("\n\n")))
    deltas = run(Scripted(tokenizer, [start + thought + end + answer]), reasoning=control, stop=("STOP",))
    final = deltas[-1]
    assert final.status is RequestStatus.FINISHED_STOPPED and text_of(deltas).endswith(" ok ")
    assert final.usage.reasoning_tokens == len(thought) + len(end)
    assert final.usage.completion_tokens < len(start + thought + end + answer)

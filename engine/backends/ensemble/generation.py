"""An ensemble with one LLM step, served as an LLM (the /v1 face): a prompt's text in, GenerationDeltas out.

The pre-processing steps (those before the LLM step in running order) run once on the prompt text, fed to the
ensemble's text input. The request itself (sampling parameters, grammar, n, stop...) then goes to the LLM step
through `Engine.generate`, with the text its `text_input` is mapped to as the prompt; that is where the prompt is
tokenized and checked against the context length. The post-processing steps (after the LLM step) run on the LLM's
text, and the ensemble's text output becomes the deltas' text.

Post-processing steps see whole words. Without `stream`, each choice's whole text runs through them once and
the choice comes back as one finished delta. With `stream`, a choice's text runs through them in pieces that
end where a word ends (before the whitespace that starts the next one, or at the end; at most MAX_HELD deltas
are held for one word), each piece one delta: a word filter such as the example's `postprocess` then works
on a stream, which it would not on the LLM's raw deltas ("he" + "ck"). /v2 generate_stream and gRPC keep
Triton's decoupled-ensemble semantics instead: every LLM response runs through the later steps on its own.
Token ids and logprobs are the LLM step's, untouched: they describe the text before post-processing. Usage
counts the prompt the LLM step saw.
"""
from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import AsyncGenerator, AsyncIterator, Callable

from conch.engine.engine import Engine
from conch.engine.backends.ensemble.run import run_steps
from conch.engine.errors import InferenceError, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.specs import EnsembleStep
from conch.engine.tensors.interface import InferRequest, Tensors, bytes_tensor, first_string
from conch.engine.tensors.llm import ALL_FLAGS, llm_outputs
from conch.engine.types import GenerationDelta, GenerationRequest


@dataclass(frozen=True)
class TextPlan:
    llm: EnsembleStep                  # the one LLM step
    prompt_input: str                  # the ensemble input the prompt text feeds
    llm_input: str                     # the ensemble tensor the LLM step reads as its text_input
    text_output: str                   # the ensemble output read back as the completion text
    pre: tuple[EnsembleStep, ...]      # run once on the prompt
    post: tuple[EnsembleStep, ...]     # run on the LLM's text (per delta when streaming)


def text_plan(config: ModelConfig, order: tuple[EnsembleStep, ...],
              lookup: Callable[[str], ModelConfig]) -> TextPlan:
    """How the ensemble serves a text prompt; raises InvalidRequest saying why it cannot."""
    llm_steps = [i for i, s in enumerate(order) if lookup(s.model).is_llm]
    if len(llm_steps) != 1:
        raise InvalidRequest(f"it has {len(llm_steps)} LLM steps, not one", param="model")
    k = llm_steps[0]
    llm = order[k]
    inputs, outputs = dict(llm.input_map), dict(llm.output_map)
    if "text_input" not in inputs or "text_output" not in outputs:
        raise InvalidRequest(f"its LLM step '{llm.model}' does not map both text_input and text_output", param="model")
    return TextPlan(llm, _text_tensor(config.inputs, "text_input", "input", required=True), inputs["text_input"],
                    _text_tensor(config.outputs, "text_output", "output"), order[:k], order[k + 1:])


def _text_tensor(specs, preferred: str, kind: str, required: bool = False) -> str:
    names = [s.name for s in specs if s.name == preferred]
    names = names or [s.name for s in specs if s.datatype == "BYTES" and not (required and s.optional)]
    if len(names) != 1:
        raise InvalidRequest(f"it has no '{preferred}' {kind} and {len(names)} BYTES {kind}s, so none is the "
                             f"text {kind}", param="model")
    return names[0]


class TextPipeline:
    def __init__(self, engine: Engine, name: str, plan: TextPlan) -> None:
        self.engine, self.name, self.plan = engine, name, plan

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        step = self.plan.llm
        llm = self.engine.get(step.model, step.model_version)
        text = request.prompt if request.prompt is not None else llm.tokenizer.decode(request.prompt_token_ids)
        tensors = await self._pre(request.id, text)
        prompt = first_string(tensors[self.plan.llm_input], self.plan.llm_input)
        inner = replace(request, id=f"{request.id}/llm", model=llm.name, version=llm.config.version, prompt=prompt,
                        prompt_token_ids=None)
        async with aclosing(self.engine.generate(inner)) as deltas:
            steps = self._streamed(tensors, deltas) if request.stream else self._whole(tensors, deltas)
            async for delta in steps:
                yield replace(delta, request_id=request.id)

    async def _streamed(self, tensors: Tensors, deltas) -> AsyncIterator[GenerationDelta]:
        held: dict[int, list[GenerationDelta]] = {}          # per choice: deltas of a word not yet complete
        async for d in deltas:
            parts = held.setdefault(d.index, [])
            if parts and _word_ends(parts, d):
                yield await self._processed(tensors, _merged(held.pop(d.index)))
                parts = held.setdefault(d.index, [])
            parts.append(d)
            if d.finished:
                yield await self._processed(tensors, _merged(held.pop(d.index)))

    async def _whole(self, tensors: Tensors, deltas) -> AsyncIterator[GenerationDelta]:
        parts: dict[int, list[GenerationDelta]] = {}
        async for d in deltas:
            parts.setdefault(d.index, []).append(d)
            if d.finished:
                yield await self._processed(tensors, _merged(parts.pop(d.index)))

    async def _processed(self, tensors: Tensors, delta: GenerationDelta) -> GenerationDelta:
        return replace(delta, text=await self._post(tensors, delta)) if delta.text and not delta.error else delta

    async def _pre(self, request_id: str, text: str) -> Tensors:
        tensors = {self.plan.prompt_input: bytes_tensor(text)}
        results = [t async for t in run_steps(self.engine, self.plan.pre, tensors, InferRequest(request_id, tensors))]
        if len(results) != 1:
            raise InferenceError(f"ensemble '{self.name}': its pre-processing steps answered {len(results)} times; "
                                 f"a text prompt needs exactly one answer")
        return results[0]

    async def _post(self, tensors: Tensors, delta: GenerationDelta) -> str:
        prompt_tokens = delta.usage.prompt_tokens if delta.usage is not None else 0
        outputs = llm_outputs(delta.text, delta, ALL_FLAGS, prompt_tokens)
        produced = {t: outputs[key] for key, t in self.plan.llm.output_map if key in outputs}
        request = InferRequest(f"{delta.request_id}/post", {})
        pieces: list[str] = []
        async for result in run_steps(self.engine, self.plan.post, {**tensors, **produced}, request):
            array = result.get(self.plan.text_output)
            if array is None:
                raise InferenceError(f"ensemble '{self.name}' produced no '{self.plan.text_output}'")
            pieces.extend(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in array.reshape(-1))
        return "".join(pieces)


MAX_HELD = 16     # deltas held back for one word at most (text without spaces still streams)


def _word_ends(held: list[GenerationDelta], new: GenerationDelta) -> bool:
    """Whether the held text is whole words: it ends in whitespace, or the new text starts a word."""
    text = "".join(d.text for d in held)
    return len(held) >= MAX_HELD or text[-1:].isspace() or new.text[:1].isspace()


def _merged(parts: list[GenerationDelta]) -> GenerationDelta:
    """One delta carrying the text, token ids and logprobs of `parts`, and the state of the last."""
    return replace(parts[-1], text="".join(p.text for p in parts), token_ids=sum((p.token_ids for p in parts), ()),
                   logprobs=sum((p.logprobs for p in parts), ()))

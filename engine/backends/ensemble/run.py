"""Running ensemble steps in order over named tensors, streaming through them.

A step that answers many times (the LLM when streaming) runs every later step once per answer, as Triton's
decoupled ensembles do, so a streamed ensemble streams end to end."""
from __future__ import annotations

from typing import AsyncGenerator

from conch.engine.engine import Engine
from conch.engine.repository.specs import EnsembleStep
from conch.engine.tensors.interface import InferRequest, Tensors
from conch.engine.tensors.llm import tensor_model


async def run_steps(engine: Engine, steps: tuple[EnsembleStep, ...], tensors: Tensors, request: InferRequest,
                    index: int = 0) -> AsyncGenerator[Tensors, None]:
    """Every tensor known once steps[index:] have run (one item per answer of the last decoupled step)."""
    if index == len(steps):
        yield tensors
        return
    step = steps[index]
    inputs = {key: tensors[t] for key, t in step.input_map if t in tensors}
    sub = InferRequest(f"{request.id}/{index}", inputs, request.parameters)
    responses = tensor_model(engine, step.model, step.model_version).infer(sub)
    try:
        async for outputs in responses:
            produced = {t: outputs[key] for key, t in step.output_map if key in outputs}
            async for result in run_steps(engine, steps, {**tensors, **produced}, request, index + 1):
                yield result
    finally:
        await responses.aclose()

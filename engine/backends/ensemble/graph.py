"""An ensemble's steps as a DAG over named tensors, checked once at load and put in running order."""
from __future__ import annotations

from typing import Callable

from conch.engine.errors import EngineError, InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.specs import EnsembleStep
from conch.engine.tensors.contract import tensor_interface

Lookup = Callable[[str], ModelConfig]


def plan(config: ModelConfig, lookup: Lookup) -> tuple[EnsembleStep, ...]:
    """The steps in an order where each runs after the steps producing its inputs.

    Fails the load, naming the problem, on an unknown model, a tensor a step model does not have,
    a tensor nothing produces, a tensor produced twice, or a cycle."""
    name = config.name
    if not config.steps:
        raise InvalidRequest(f"ensemble '{name}' has no steps", param="config")
    produced = {t.name for t in config.inputs}
    for i, step in enumerate(config.steps):
        _check_step(name, i, step, lookup)
        for _, tensor in step.output_map:
            if tensor in produced:
                raise InvalidRequest(f"ensemble '{name}': tensor '{tensor}' is produced more than once",
                                     param="config")
            produced.add(tensor)
    order, available, pending = [], {t.name for t in config.inputs}, list(config.steps)
    while pending:
        ready = [s for s in pending if {t for _, t in s.input_map} <= available]
        if not ready:
            missing = sorted({t for s in pending for _, t in s.input_map} - produced)
            what = f"tensor(s) {missing} are produced by no step or input" if missing else "the steps form a cycle"
            raise InvalidRequest(f"ensemble '{name}': {what}", param="config")
        for step in ready:
            order.append(step)
            pending.remove(step)
            available |= {t for _, t in step.output_map}
    unfilled = sorted({t.name for t in config.outputs} - available)
    if unfilled:
        raise InvalidRequest(f"ensemble '{name}': output(s) {unfilled} are produced by no step", param="config")
    return tuple(order)


def _check_step(ensemble: str, index: int, step: EnsembleStep, lookup: Lookup) -> None:
    where = f"ensemble '{ensemble}' step {index} ('{step.model}')"
    if step.model == ensemble:
        raise InvalidRequest(f"{where} runs the ensemble itself", param="config")
    try:
        inputs, outputs = tensor_interface(lookup(step.model))
    except EngineError as exc:
        raise InvalidRequest(f"{where}: unknown model '{step.model}': {exc.message}", param="config") from exc
    in_names, out_names = {t.name for t in inputs}, {t.name for t in outputs}
    for key, _ in step.input_map:
        if key not in in_names:
            raise InvalidRequest(f"{where}: model has no input '{key}'; inputs: {sorted(in_names)}", param="config")
    for key, _ in step.output_map:
        if key not in out_names:
            raise InvalidRequest(f"{where}: model has no output '{key}'; outputs: {sorted(out_names)}",
                                 param="config")
    unmapped = [t.name for t in inputs if not t.optional and t.name not in dict(step.input_map)]
    if unmapped:
        raise InvalidRequest(f"{where}: required input(s) {unmapped} are not mapped", param="config")

"""The tensor contracts an LLM model may declare, by the tensors that mark them, and the load-time refusal of
an LLM config that declares tensors no contract serves (it would otherwise load and fail every request).

- Triton's LLM contract (text in, text out): `text_input` (engine/tensors/llm.py);
- TensorRT-LLM's raw contract (token ids in and out): `input_ids` and `output_ids` (engine/tensors/trtllm.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from conch.engine.errors import InvalidRequest

if TYPE_CHECKING:
    from conch.engine.repository.config import ModelConfig

TEXT_INPUTS = frozenset({"text_input"})
TRTLLM_INPUTS = frozenset({"input_ids"})
TRTLLM_OUTPUTS = frozenset({"output_ids"})


def check_llm_tensors(config: ModelConfig) -> None:
    if not config.is_llm or not config.inputs:
        return
    inputs, outputs = {t.name for t in config.inputs}, {t.name for t in config.outputs}
    if inputs >= TEXT_INPUTS or (inputs >= TRTLLM_INPUTS and outputs >= TRTLLM_OUTPUTS):
        return
    raise InvalidRequest(
        f"model '{config.name}' ({config.backend} backend) declares inputs {sorted(inputs)} and outputs "
        f"{sorted(outputs)}, which no LLM contract serves: declare Triton's LLM contract (text_input -> "
        f"text_output) or TensorRT-LLM's (input_ids, ... -> output_ids, ...)", param="config")

"""Triton's LLM tensor contract, which every LLM model offers whatever its backend, and the tensor interface of
a model known from its config alone (the lookup of a loaded model's tensors is engine/tensors/llm.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from conch.engine.repository.config import ModelConfig
from conch.engine.repository.specs import TensorSpec

if TYPE_CHECKING:
    pass

LLM_INPUTS = (
    TensorSpec("text_input", "BYTES", (1,)),
    TensorSpec("stream", "BOOL", (1,), optional=True),
    TensorSpec("sampling_parameters", "BYTES", (1,), optional=True),
    TensorSpec("exclude_input_in_output", "BOOL", (1,), optional=True),
    TensorSpec("return_finish_reason", "BOOL", (1,), optional=True),
    TensorSpec("return_num_input_tokens", "BOOL", (1,), optional=True),
    TensorSpec("return_num_output_tokens", "BOOL", (1,), optional=True),
    TensorSpec("image", "BYTES", (-1,), optional=True),    # base64 images, as Triton's vLLM backend (tensors/images.py)
)
LLM_OUTPUTS = (
    TensorSpec("text_output", "BYTES", (-1,)),
    TensorSpec("finish_reason", "BYTES", (-1,)),
    TensorSpec("num_input_tokens", "UINT32", (1,)),
    TensorSpec("num_output_tokens", "UINT32", (1,)),
)
TOKENIZER_INPUTS = (TensorSpec("text_input", "BYTES", (1,)),)
TOKENIZER_OUTPUTS = (TensorSpec("input_ids", "INT32", (-1,)),)
DETOKENIZER_INPUTS = (TensorSpec("output_ids", "INT32", (-1,)),)
DETOKENIZER_OUTPUTS = (TensorSpec("text_output", "BYTES", (1,)),)
# The embedding backend: exactly one of TEXT / INPUT_IDS (docs/embeddings.md); EMBEDDING is [batch, dim].
EMBEDDING_INPUTS = (TensorSpec("TEXT", "BYTES", (-1,), optional=True),
                    TensorSpec("INPUT_IDS", "INT64", (-1, -1), optional=True))
EMBEDDING_OUTPUTS = (TensorSpec("EMBEDDING", "FP32", (-1, -1)),)

_BUILTIN = {"tokenizer": (TOKENIZER_INPUTS, TOKENIZER_OUTPUTS),
            "detokenizer": (DETOKENIZER_INPUTS, DETOKENIZER_OUTPUTS),
            "embedding": (EMBEDDING_INPUTS, EMBEDDING_OUTPUTS)}


def tensor_interface(config: ModelConfig) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """(inputs, outputs) of a model, known from its config alone (what ensemble checks use at load)."""
    if config.is_llm:
        return config.inputs or LLM_INPUTS, config.outputs or LLM_OUTPUTS
    if config.backend in _BUILTIN and not config.inputs:
        return _BUILTIN[config.backend]
    return config.inputs, config.outputs



def batches(config: ModelConfig) -> bool:
    """Whether the model's tensors carry a leading batch dimension (Triton's `max_batch_size > 0`); a Conch
    config.yaml declares whole shapes."""
    return config.triton is not None and config.triton.max_batch_size > 0

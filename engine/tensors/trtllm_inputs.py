"""Reading TensorRT-LLM's raw tensor contract (the `tensorrt_llm` model of Triton's `inflight_batcher_llm`)
into a GenerationRequest: token ids in, sampling from the runtime tensors, stop and bad words from TRT-LLM's
word-list format ([2, L]: the words' ids laid end to end, then each word's end offset, -1 padded).

One request per call (a batch of 1), one beam: `beam_width` > 1 and the logits outputs are refused by name,
as are the inputs Conch's engine has no meaning for (prompt tables, LoRA, embedding bias), when given.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.params import build_sampling
from conch.engine.tensors.interface import Tensors
from conch.engine.tensors.word_lists import BANNED
from conch.engine.types import SamplingParams

# TRT-LLM input -> the sampling parameter it sets (engine/params' table checks the value)
SAMPLING = {"request_output_len": "max_tokens", "runtime_top_k": "top_k", "runtime_top_p": "top_p",
            "temperature": "temperature", "repetition_penalty": "repetition_penalty", "min_length": "min_tokens",
            "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
            "random_seed": "seed"}
REFUSED_IF_TRUE = ("return_context_logits", "return_generation_logits")


def row(tensors: Tensors, name: str, batched: bool) -> np.ndarray | None:
    """The request's one row of a tensor (the batch dimension dropped), None when not given."""
    array = tensors.get(name)
    if array is None:
        return None
    if batched:
        if array.shape[0] != 1:
            raise InvalidRequest(f"input '{name}': one request per call (batch of 1), got {array.shape[0]}",
                                 param=name)
        array = array[0]
    return array


def scalar(tensors: Tensors, name: str, batched: bool) -> Any:
    array = row(tensors, name, batched)
    return None if array is None or array.size == 0 else array.reshape(-1)[0].item()


def prompt_ids(tensors: Tensors, batched: bool) -> tuple[int, ...]:
    ids = row(tensors, "input_ids", batched)
    assert ids is not None          # check_inputs: input_ids is required
    ids = ids.reshape(-1)
    length = scalar(tensors, "input_lengths", batched)
    return tuple(int(i) for i in (ids[:int(length)] if length is not None else ids))


def sampling(tensors: Tensors, batched: bool, tokenizer: Any) -> SamplingParams:
    if (beams := scalar(tensors, "beam_width", batched)) not in (None, 1):
        raise InvalidRequest(f"beam_width {beams}: Conch's engine samples one beam", param="beam_width")
    for name in REFUSED_IF_TRUE:
        if scalar(tensors, name, batched):
            raise InvalidRequest(f"'{name}' is not served by Conch's engine", param=name)
    values = {conch: scalar(tensors, trt, batched) for trt, conch in SAMPLING.items()}
    params = build_sampling({k: v for k, v in values.items() if v is not None})
    if scalar(tensors, "return_log_probs", batched):
        params = replace(params, logprobs=0)
    stops = words(row(tensors, "stop_words_list", batched), "stop_words_list")
    bans = words(row(tensors, "bad_words_list", batched), "bad_words_list")
    end_id = scalar(tensors, "end_id", batched)
    stop_ids = [*params.stop_token_ids, *([int(end_id)] if end_id is not None else []),
                *(w[0] for w in stops if len(w) == 1)]
    stop_text = [tokenizer.decode(list(w)) for w in stops if len(w) > 1]
    for word in bans:
        if len(word) != 1:
            raise InvalidRequest("a bad word of several tokens: this engine bans single-token bad words only",
                                 param="bad_words_list")
    bias = {**dict(params.logit_bias), **{w[0]: BANNED for w in bans}}
    return replace(params, stop_token_ids=tuple(dict.fromkeys(stop_ids)), stop=(*params.stop, *stop_text),
                   logit_bias=tuple(bias.items()))


def words(array: np.ndarray | None, name: str) -> list[tuple[int, ...]]:
    """TRT-LLM's [2, L] word list -> each word's ids."""
    if array is None or array.size == 0:
        return []
    if array.ndim != 2 or array.shape[0] != 2:
        raise InvalidRequest(f"input '{name}' must be [2, L] (ids, then offsets), got {list(array.shape)}", param=name)
    ids, offsets = array[0].tolist(), [int(o) for o in array[1] if o >= 0]
    out, start = [], 0
    for end in offsets:
        if not start <= end <= len(ids):
            raise InvalidRequest(f"input '{name}': offset {end} is out of its ids", param=name)
        if end > start:
            out.append(tuple(int(i) for i in ids[start:end]))
        start = end
    return out

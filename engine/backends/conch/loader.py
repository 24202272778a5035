"""Loads the model a config names: an HF folder or a GGUF file (engine/weights/gguf_file.py) and, for a vision
model's GGUF, its mmproj file (model/mmproj.py), with its tokenizer, its chat template (the config's, else the
model's own), its generation defaults, dtype and threads."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from conch.engine.backends.conch import native
from conch.engine.backends.conch.model import hf_attention
from conch.engine.backends.conch.model.gguf_layers import ARCHS, build_quantized
from conch.engine.backends.conch.model.gguf_packing import Packing
from conch.engine.backends.conch.model.mmproj import load_mmproj
from conch.engine.backends.conch.model.quantized import FLOAT_TYPES, unsupported
from conch.engine.backends.conch.model.vision_families import is_vision
from conch.engine.errors import InvalidRequest
from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.repository.config import ModelConfig
from conch.engine.weights import gguf_config
from conch.engine.weights.folder import weights_folder
from conch.engine.weights.gguf_file import GgufInfo, load_gguf_dequantized, load_gguf_tokenizer, read_gguf
from conch.engine.weights.model_files import generation_defaults, is_gguf

log = logging.getLogger(__name__)
_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


@dataclass(frozen=True)
class Loaded:
    model: Any                  # an HF causal LM (or vision-language model) in eval mode, in the config's dtype
    tokenizer: Any
    defaults: GenerationDefaults
    processor: Any = None       # a vision-language model's image processor (model/vision.py), else None


def load(config: ModelConfig) -> Loaded:
    if config.dtype not in _DTYPES:
        raise InvalidRequest(f"model '{config.name}': config key 'dtype' must be one of {sorted(_DTYPES)}",
                             param="dtype")
    torch.set_num_threads(config.num_threads or os.cpu_count() or 1)
    ref, dtype = weights_folder(config), _DTYPES[config.dtype]
    processor = None
    if config.mmproj is not None and not is_gguf(ref):
        raise InvalidRequest(f"model '{config.name}': 'mmproj' goes with .gguf weights (a folder holds its own "
                             f"vision tower)", param="mmproj")
    if is_gguf(ref):
        info = read_gguf(Path(ref))
        kernel = native.load("quant_matmul") if info.tensor_types - FLOAT_TYPES else None
        flat = config.runner == "auto" and config.mmproj is None
        packing = Packing(info, kernel, flat) if kernel is not None and info.architecture in ARCHS else None
        tokenizer = load_gguf_tokenizer(info, config.resolve(config.tokenizer))    # (the matrices packed meanwhile)
        model = _gguf_model(info, dtype, packing, flat)
        if config.mmproj is not None:             # the vision tower beside it (model/mmproj.py)
            model, processor = load_mmproj(Path(config.resolve(config.mmproj)), model, tokenizer, dtype)
    else:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(config.resolve(config.tokenizer) or ref)
        if is_vision(AutoConfig.from_pretrained(ref).model_type):
            return _vision(config, ref, dtype, tokenizer)
        model = AutoModelForCausalLM.from_pretrained(ref, dtype=dtype, attn_implementation=hf_attention.register())
    if config.chat_template:
        tokenizer.chat_template = config.chat_template
    return Loaded(model.eval(), tokenizer, generation_defaults(ref), processor)


def _vision(config: ModelConfig, ref: str, dtype: torch.dtype, tokenizer: Any) -> Loaded:
    """A vision-language model (model/vision_families.py) with its own image processor."""
    from transformers import AutoImageProcessor, AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(ref, dtype=dtype, attn_implementation="sdpa")
    if config.chat_template:
        tokenizer.chat_template = config.chat_template
    return Loaded(model.eval(), tokenizer, generation_defaults(ref), AutoImageProcessor.from_pretrained(ref))


def _gguf_model(info: GgufInfo, dtype: torch.dtype, packing: Packing | None, flat: bool) -> Any:
    """The file's model: built from the file with its quantized matrices kept in their blocks where a kernel
    takes them (`packing`'s: no dequantized copy, the load's peak about the file's size); else dequantized
    by transformers (an architecture its GGUF loader does not read, gguf_config.AS_LLAMA: tensor by tensor by
    gguf_layers.py), and the log says why. `flat`: the flattened runner may serve it (runner auto, no vision
    tower), so a family it takes gets gguf_skeleton.py's module tree (no modeling import at load)."""
    quantized = info.tensor_types - FLOAT_TYPES
    transformers_reads = info.architecture not in gguf_config.AS_LLAMA
    if info.architecture not in ARCHS or (quantized and packing is None and transformers_reads):
        if quantized:
            log.warning("%s: served dequantized (%s), %s", info.path.name, ", ".join(sorted(quantized)),
                        f"its architecture {info.architecture} keeps quantized matrices only for {sorted(ARCHS)}"
                        if info.architecture not in ARCHS else
                        "no quantized kernel here (no C++ compiler, or CONCH_NATIVE_KERNELS=0)")
        return load_gguf_dequantized(info, dtype, hf_attention.register())
    left = unsupported(quantized) if packing is not None else sorted(quantized)
    if left:
        log.warning("%s: matrices of type %s have no kernel and are served dequantized", info.path.name,
                    ", ".join(left))
    return build_quantized(info, dtype, None, hf=not flat, packing=packing)

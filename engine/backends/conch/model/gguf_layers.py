"""A model loaded from a GGUF (engine/weights/gguf_file.py) without a dequantized copy of the file: its HF
skeleton is built with its parameters on the meta device, then filled tensor by tensor from the memory-mapped
file; each Linear whose GGUF matrix has a kernel type becomes a QuantLinear over the file's own blocks, packed
(quantized.py; by gguf_packing.py's thread, which may have started before the tokenizer loaded), the token
embedding of such a type a QuantEmbedding (a tied head: a QuantLinear over the same packed blocks), every other
tensor (norms, a matrix of a type without a kernel) is dequantized alone into the model's dtype. Each tensor's
mapped pages are released once it is copied or packed, so the load's peak is about the file's size plus those
tensors, never the whole model dequantized (transformers' GGUF loader dequantizes every tensor first) nor the
file twice.

The module tree filled is gguf_skeleton.py's where the flattened runner serves the file (no import of
transformers' modeling stack; hf_model.over builds the HF model over its tensors on first use), else transformers'
own model of the config built on the meta device.

Names: transformers' GGUF -> HF tensor map and its per-architecture tensor processors (llama's q/k rows
permuted back, Gemma's norms less the 1 llama.cpp adds); a quantized q/k matrix's row order is gguf_packing.py's
(HF's, or the flattened runner's RoPE pairs, which its QuantLinear records). ARCHS: the architectures whose
Linears are kept quantized."""
from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from conch.engine.backends.conch.model import hf_model
from conch.engine.backends.conch.model.gguf_skeleton import skeleton
from conch.engine.backends.conch.model.gguf_packing import Packed, Packing
from conch.engine.backends.conch.model.quantized import QUANT_TYPES, QuantEmbedding, QuantLinear
from conch.engine.weights import gguf_config
from conch.engine.weights.gguf_file import GgufInfo, load_gguf_config

log = logging.getLogger(__name__)

ARCHS = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3", "smollm3", "granite"})


def build_quantized(info: GgufInfo, dtype: torch.dtype, kernel: Any, hf: bool = True,
                    packing: Packing | None = None) -> Any:
    """The HF causal LM of the GGUF `info` reads in `dtype`, its Linears' matrices in the file's blocks where
    `kernel` (native/quant_matmul) takes their type. `hf` False: gguf_skeleton.py's module tree where it has
    the model type (the flattened runner's; its `hf()` the HF model, built on first use), without importing
    transformers' modeling stack, and q / k packed in the flattened runner's order (gguf_packing.py).
    `packing`: the matrices' packs already in flight (gguf_packing.Packing of the same `hf`), else started here.
    Raises ValueError naming a tensor the file lacks."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map

    path, architecture = info.path, info.architecture
    if packing is None and kernel is not None:
        packing = Packing(info, kernel, flat=not hf)
    config = load_gguf_config(info, light=not hf)
    model = (None if hf else skeleton(config, dtype)) or hf_model.on_meta(config, dtype)
    as_arch = "llama" if architecture in gguf_config.AS_LLAMA else architecture     # (its q / k permuted so)
    processor = TENSOR_PROCESSORS.get(as_arch, TensorProcessor)(config=config.to_dict())
    with _name_maps_cached():
        names = get_gguf_hf_weights_map(model, processor)
    packed = packing.result() if packing is not None else {}          # their file pages released as packed
    quantized: list[tuple[str, Packed]] = []
    for tensor in info.header.tensors:
        hf_name = names.get(tensor.name)
        if hf_name is None:
            continue
        module_name, _, attr = hf_name.rpartition(".")
        module = model.get_submodule(module_name)
        if attr == "weight" and isinstance(module, torch.nn.Linear) and tensor.name in packed:
            quantized.append((module_name, packed[tensor.name]))
        elif attr == "weight" and isinstance(module, torch.nn.Embedding) and tensor.name in packed:
            hf_model.swap_embedding(model, module_name, packed[tensor.name].matrix, dtype)
        else:
            weights = processor.process(weights=_dequantized(tensor), name=tensor.name).weights
            value = torch.from_numpy(np.array(weights, dtype=np.float32)).to(dtype)     # a copy: the map is read-only
            shape = getattr(module, attr).shape                                       # the skeleton's (meta)
            module._parameters[attr] = torch.nn.Parameter(value.view(shape), requires_grad=False)
            info.header.release(tensor)                               # copied: its pages are the file's again
    for module_name, matrix in quantized:
        _swap(model, module_name, matrix)
    _tie_or_refuse(model, path)
    log.info("%s: %d matrices kept in their GGUF blocks (%s)", path.name, len(quantized),
             ", ".join(sorted({n for n, q in QUANT_TYPES.items() if any(p.matrix.qtype == q for _, p in quantized)})))
    return model.eval()


@contextlib.contextmanager
def _name_maps_cached() -> Iterator[None]:
    """transformers' get_gguf_hf_weights_map builds gguf's TensorNameMap again for every module it recurses
    into (~400 for a 30-layer model, 18 ms each); while it runs, gguf's builder answers from a cache. The map is
    a pure function of (architecture, layers), so a concurrent caller gets the same answer either way."""
    import gguf

    original = gguf.get_tensor_name_map
    gguf.get_tensor_name_map = functools.cache(original)
    try:
        yield
    finally:
        gguf.get_tensor_name_map = original


def _dequantized(tensor: Any) -> np.ndarray:
    """One tensor's values as float32 (out, in) or (n,): gguf's dequantizer over its memory-mapped bytes."""
    from gguf.quants import dequantize

    return dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)


def _swap(model: Any, module_name: str, packed: Packed) -> None:
    parent_name, _, attr = module_name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    old = getattr(parent, attr)
    bias = None if old.bias is None or old.bias.is_meta else old.bias.detach()
    setattr(parent, attr, QuantLinear(packed.matrix, bias, packed.order))


def _tie_or_refuse(model: Any, path: Path) -> None:
    """A head the file does not hold is the token embedding (tied): the same blocks when the embedding kept
    them, else its tensor; any other tensor left on meta is refused."""
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    if isinstance(head, torch.nn.Linear) and head.weight.is_meta and isinstance(embedding, QuantEmbedding):
        model.set_output_embeddings(QuantLinear(embedding.matrix, None))
        model.config.tie_word_embeddings = False       # one set of blocks, read by the lookup and the head
    elif isinstance(head, torch.nn.Linear) and head.weight.is_meta:
        head.weight = embedding.weight
    elif isinstance(head, QuantLinear):
        model.config.tie_word_embeddings = False       # the embedding stays a tensor, the head the file's blocks
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"{path.name}: the file holds no tensor for {', '.join(missing[:5])}")

"""A vision-language model from two GGUF files, as llama.cpp ships them: the language model's GGUF (loaded as
any GGUF, loader.py) and its `mmproj` GGUF, the vision tower and projector that llama.cpp's
`convert_hf_to_gguf.py --mmproj` writes (`general.architecture` clip, `clip.projector_type`).

A registry by projector type (STYLE: registries, not elif chains) gives each one's HF model: the family's
`...ForConditionalGeneration` built on the meta device from a config read off the mmproj's header, its
language model and head the text GGUF's modules, its tower and projector filled from the mmproj's tensors
(dequantized into the model's dtype: a tower is a few hundred MB at most), and its image processor from the
header's size, mean and std. The image tokens' ids come from the tokenizer (the text GGUF's vocabulary).

- gemma3: SigLIP (`v.*`) and Gemma 3's projector (`mm.input_projection`, `mm.soft_emb_norm`, which the
  converter stored as 1 + w); `clip.vision.projector.scale_factor` is the pooling kernel (absent: 4, 256
  tokens from 896/14)."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from conch.engine.errors import BackendUnavailable

log = logging.getLogger(__name__)

Builder = Callable[[dict[str, Any], Any, Any, torch.dtype], tuple[Any, Any, dict[str, str]]]
# (mmproj header, text model, tokenizer, dtype) -> (the VLM on meta but its language model, its image
# processor, the mmproj tensor name -> its parameter's name in the VLM)


def _header(reader: Any) -> dict[str, Any]:
    out = {}
    for name, field in reader.fields.items():
        try:
            out[name] = field.contents()
        except (ValueError, IndexError, TypeError):
            continue
    return out


_SIGLIP = {"ln1": "layer_norm1", "ln2": "layer_norm2", "ffn_up": "mlp.fc1", "ffn_down": "mlp.fc2",
           "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_out": "self_attn.out_proj"}


def _siglip_name(name: str) -> str | None:
    """A `v.*` tensor's name in transformers' SiglipVisionModel (under `model.vision_tower`)."""
    fixed = {"v.patch_embd": "embeddings.patch_embedding", "v.position_embd": "embeddings.position_embedding",
             "v.post_ln": "post_layernorm"}
    stem, _, attr = name.rpartition(".")
    if stem in fixed:
        return f"model.vision_tower.{fixed[stem]}.{attr}"
    block = re.fullmatch(r"v\.blk\.(\d+)\.(\w+)", stem)
    if block and block.group(2) in _SIGLIP:
        return f"model.vision_tower.encoder.layers.{block.group(1)}.{_SIGLIP[block.group(2)]}.{attr}"
    return None


def _gemma3(meta: dict[str, Any], text: Any, tokenizer: Any, dtype: torch.dtype) -> tuple[Any, Any, dict[str, str]]:
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, SiglipVisionConfig
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    size, patch = int(meta["clip.vision.image_size"]), int(meta["clip.vision.patch_size"])
    vision = SiglipVisionConfig(
        hidden_size=int(meta["clip.vision.embedding_length"]), image_size=size, patch_size=patch,
        intermediate_size=int(meta["clip.vision.feed_forward_length"]), vision_use_head=False,
        num_hidden_layers=int(meta["clip.vision.block_count"]),
        num_attention_heads=int(meta["clip.vision.attention.head_count"]),
        layer_norm_eps=float(meta.get("clip.vision.attention.layer_norm_epsilon", 1e-6)))
    side = size // patch // int(meta.get("clip.vision.projector.scale_factor", 4))
    boi, image, eoi = tokenizer.convert_tokens_to_ids(["<start_of_image>", "<image_soft_token>", "<end_of_image>"])
    config = Gemma3Config(text_config=text.config, vision_config=vision, mm_tokens_per_image=side * side,
                          boi_token_index=boi, eoi_token_index=eoi, image_token_index=image)
    with torch.device("meta"):
        vlm = Gemma3ForConditionalGeneration(config).to(dtype)   # type: ignore[arg-type]
    names = {"mm.input_projection.weight": "model.multi_modal_projector.mm_input_projection_weight",
             "mm.soft_emb_norm.weight": "model.multi_modal_projector.mm_soft_emb_norm.weight"}
    processor = Gemma3ImageProcessorPil(size={"height": size, "width": size},
                                        image_mean=list(meta.get("clip.vision.image_mean", [0.5] * 3)),
                                        image_std=list(meta.get("clip.vision.image_std", [0.5] * 3)))
    return vlm, processor, names


def _gemma3_value(name: str, value: np.ndarray) -> np.ndarray:
    return value - 1.0 if name == "mm.soft_emb_norm.weight" else value      # the converter's 1 + w, undone


PROJECTORS: dict[str, tuple[Builder, Callable[[str, np.ndarray], np.ndarray]]] = {"gemma3": (_gemma3, _gemma3_value)}


def load_mmproj(path: Path, text: Any, tokenizer: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """(the vision-language model whose language model is `text`, its image processor) from the mmproj GGUF
    at `path`. BackendUnavailable for a file that is no mmproj, a projector type outside PROJECTORS, or one
    that lacks a tensor of the tower."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as exc:
        raise BackendUnavailable(f"{path.name} is not a readable GGUF file: {exc}") from exc
    meta = _header(reader)
    kind = meta.get("clip.projector_type")
    if meta.get("general.architecture") != "clip" or kind not in PROJECTORS:
        raise BackendUnavailable(f"{path.name}: not an mmproj file of a projector served here (its projector type "
                                 f"{kind!r}; served: {', '.join(sorted(PROJECTORS))})")
    build, value = PROJECTORS[kind]
    vlm, processor, names = build(meta, text, tokenizer, dtype)
    vlm.model.language_model, vlm.lm_head = text.model, text.lm_head
    for tensor in reader.tensors:
        target = names.get(tensor.name) or _siglip_name(tensor.name)
        if target is None:
            raise BackendUnavailable(f"{path.name}: tensor {tensor.name} has no place in the {kind} tower")
        owner, _, attr = target.rpartition(".")
        module = vlm.get_submodule(owner)
        data = value(tensor.name, dequantize(tensor.data, tensor.tensor_type).astype(np.float32))
        shape = getattr(module, attr).shape
        module._parameters[attr] = torch.nn.Parameter(torch.from_numpy(data).to(dtype).view(shape),
                                                      requires_grad=False)
    missing = [n for n, p in vlm.named_parameters() if p.is_meta]
    if missing:
        raise BackendUnavailable(f"{path.name}: the file holds no tensor for {', '.join(missing[:5])}")
    _real_buffers(vlm)
    log.info("%s: a %s tower and projector, %d tensors", path.name, kind, len(reader.tensors))
    return vlm.eval(), processor


def _real_buffers(vlm: Any) -> None:
    """The buffers the skeleton left on meta: SigLIP's position ids (0..patches-1); any other is refused."""
    for key, buffer in list(vlm.named_buffers()):
        if not buffer.is_meta:
            continue
        owner_name, _, name = key.rpartition(".")
        if name != "position_ids":
            raise BackendUnavailable(f"the vision tower's buffer {key} has no value")
        vlm.get_submodule(owner_name).register_buffer(name, torch.arange(buffer.shape[-1]).expand(buffer.shape),
                                                      persistent=False)

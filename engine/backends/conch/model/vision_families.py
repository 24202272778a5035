"""The vision-language families the own engine serves, by the HF config's `model_type` (STYLE: registries, not
elif chains). Each says how its prompt holds an image (`VisionSpec`: the placeholder its chat template writes,
what its processor expands that to, the image token and its count), how its tower and projector turn a batch of
pixels into the language model's input embeddings (the model's own HF modules), and whether an image's tokens
attend to each other both ways.

Every family has the same parts, as transformers lays them out: `model.vision_tower`,
`model.multi_modal_projector`, `model.language_model` (a families.py text model) and `lm_head`; the vision
config's `image_size` and `patch_size` set the pixels (S x S) and patches.

- llava: Llava-1.5. A CLIP tower read at `vision_feature_layer`, its CLS token dropped ("default" strategy),
  Llava's two-layer MLP projector; `<image>` in the prompt, repeated once per patch.
- gemma3: Gemma 3 (4B and up). A SigLIP tower, its patches average-pooled to `mm_tokens_per_image` (256: 64x64
  patches in 4x4 windows), RMS-normed and projected; `<start_of_image>` in the prompt, which its processor
  expands to `\\n\\n<start_of_image>` + 256 `<image_soft_token>` + `<end_of_image>\\n\\n`. An image's soft tokens
  attend to each other both ways (HF's token_type_ids block mask, on the sliding-window layers too), so a prefill
  chunk never ends inside one (VisionPrompt.chunk).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from conch.engine.images import VisionSpec

Features = Callable[[Any, Any, torch.Tensor], torch.Tensor]   # (vlm.model, vlm.config, (B, 3, S, S)) -> (B, N, hidden)


@dataclass(frozen=True)
class VisionFamily:
    name: str
    spec: Callable[[Any, Any], VisionSpec]    # (vlm.config, tokenizer) -> the prompt's image placeholder
    features: Features
    bidirectional: bool = False              # an image's tokens attend to each other both ways (Gemma 3)


def _llava_spec(c: Any, tokenizer: Any) -> VisionSpec:
    patches = (c.vision_config.image_size // c.vision_config.patch_size) ** 2
    n = patches + (0 if c.vision_feature_select_strategy == "default" else 1)     # "full" keeps CLS
    return VisionSpec(tokenizer.convert_ids_to_tokens(c.image_token_id), c.image_token_id, n)


def _llava_features(model: Any, c: Any, pixels: torch.Tensor) -> torch.Tensor:
    out = model.get_image_features(pixel_values=pixels, vision_feature_layer=c.vision_feature_layer,
                                   vision_feature_select_strategy=c.vision_feature_select_strategy)
    return out.pooler_output if hasattr(out, "pooler_output") else out


def _gemma3_spec(c: Any, tokenizer: Any) -> VisionSpec:
    boi, image, eoi = tokenizer.convert_ids_to_tokens([c.boi_token_id, c.image_token_id, c.eoi_token_id])
    n = c.mm_tokens_per_image
    return VisionSpec(boi, c.image_token_id, n, f"\n\n{boi}{image * n}{eoi}\n\n")   # Gemma3Processor's


def _gemma3_features(model: Any, c: Any, pixels: torch.Tensor) -> torch.Tensor:
    return model.get_image_features(pixel_values=pixels).pooler_output


FAMILIES: dict[str, VisionFamily] = {
    "llava": VisionFamily("llava", _llava_spec, _llava_features),
    "gemma3": VisionFamily("gemma3", _gemma3_spec, _gemma3_features, bidirectional=True),
}


def is_vision(model_type: str | None) -> bool:
    return model_type in FAMILIES

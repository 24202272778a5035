"""Images through to vLLM's multimodal inputs: a request's `ImageInput`s decoded into the PIL images vLLM's
`multi_modal_data` takes, and the model's placeholder (its image token) read from vLLM's model config.

vLLM expands each placeholder into the image's tokens itself (its multimodal processor), so the tokenize step
leaves one token an image (`VisionSpec.tokens_per_image` 1) and Conch's usage counts the placeholder, not the
image's tokens (vLLM's own prompt length is not returned to Conch before the end)."""
from __future__ import annotations

import logging
from typing import Any

from conch.engine.images import ImageInput, VisionSpec

log = logging.getLogger(__name__)


def vision_spec(model_config: Any, tokenizer: Any) -> VisionSpec | None:
    """The placeholder of a multimodal model vLLM serves (Llava's `<image>`), or None for a text model."""
    if not getattr(model_config, "is_multimodal_model", False):
        return None
    hf = model_config.hf_config
    token_id = getattr(hf, "image_token_id", None)
    if token_id is None:
        token_id = getattr(hf, "image_token_index", None)
    if token_id is None:
        log.warning("%s: a multimodal model with no image token in its config: served without images",
                    getattr(hf, "model_type", "model"))
        return None
    return VisionSpec(tokenizer.convert_ids_to_tokens(token_id), token_id, 1)


def multi_modal_data(images: tuple[ImageInput, ...]) -> dict[str, list[Any]]:
    """{"image": [PIL RGB images]} in prompt order; InvalidRequest for one that does not decode."""
    return {"image": [image.rgb(f"image {i}") for i, image in enumerate(images)]}

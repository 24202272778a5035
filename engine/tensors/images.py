"""The LLM tensor contract's `image` input, as Triton's vLLM backend takes it for Llava: BYTES, dims [-1], one
element per image, each the image file in base64 (a `data:` URL is read too). The text_input holds the model's
placeholder (`<image>` for Llava) where each image goes; a text_input that holds none gets one per image at its
start."""
from __future__ import annotations

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.images import ImageInput, VisionSpec, base64_bytes, data_url_bytes

IMAGE_INPUT = "image"


def tensor_images(array: np.ndarray | None) -> tuple[ImageInput, ...]:
    if array is None:
        return ()
    images = []
    for i, value in enumerate(array.reshape(-1)):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        param = f"{IMAGE_INPUT}.{i}"
        data = data_url_bytes(text, param) if text.startswith("data:") else base64_bytes(text.strip(), param)
        images.append(ImageInput.of(data, param))
    return tuple(images)


def placed_text(text: str, images: tuple[ImageInput, ...], vision: VisionSpec | None, model: str) -> str:
    """`text` with a placeholder per image at its start if it holds none; InvalidRequest for a text-only model."""
    if not images:
        return text
    if vision is None:
        raise InvalidRequest(f"model '{model}' has no vision: it takes text only, not the '{IMAGE_INPUT}' input",
                             param=IMAGE_INPUT)
    return text if vision.placeholder in text else vision.placeholder * len(images) + "\n" + text

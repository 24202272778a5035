"""Real images for the vision tests: random-pixel PNGs and JPEGs made with Pillow, and their data URLs."""
from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image


def picture(seed: int, width: int = 48, height: int = 40, kind: str = "PNG") -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format=kind)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"

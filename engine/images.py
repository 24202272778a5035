"""Images in a generation request: the typed value every face reads its image parts into, and what a vision
model says about its image placeholders.

An `ImageInput` is the image's bytes as the client sent them (decoded from base64 or fetched by the gateway),
its media type, read from the bytes themselves (a client's claim is not trusted), and a content hash: two
requests that send the same screenshot carry equal digests, which the own engine keys its image embeddings and
its prefix cache by. `VisionSpec` is a model's: the text its chat template writes for an image, the text the
tokenize step expands it to, and the token id and count of the image's embedding rows (counted in usage).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import io
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from conch.engine.errors import InvalidRequest

MAX_IMAGE_BYTES = 20 * 1024 * 1024     # the default bound on one image, decoded (OpenAI's and Anthropic's)

# magic bytes -> media type; only these are taken (the types every face's peers accept)
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
MEDIA_TYPES = frozenset(kind for _, kind in _SIGNATURES) | {"image/webp"}


def sniff(data: bytes) -> str | None:
    """The media type the bytes start with, or None for anything but PNG, JPEG, GIF and WebP."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _SIGNATURES if data.startswith(magic)), None)


@dataclass(frozen=True)
class ImageInput:
    """One image of a request, in the order its placeholder stands in the prompt."""

    data: bytes = field(repr=False)
    media_type: str
    digest: str                 # sha256 of `data`, hex

    @classmethod
    def of(cls, data: bytes, param: str, max_bytes: int = MAX_IMAGE_BYTES) -> "ImageInput":
        """The image, or InvalidRequest naming `param` for an empty, oversized or unknown-typed one."""
        if not data:
            raise InvalidRequest("the image is empty", param=param)
        if len(data) > max_bytes:
            raise InvalidRequest(f"the image is {len(data)} bytes, over the limit of {max_bytes}", param=param)
        kind = sniff(data)
        if kind is None:
            raise InvalidRequest(f"the image is not one of {', '.join(sorted(MEDIA_TYPES))}", param=param)
        return cls(data, kind, hashlib.sha256(data).hexdigest())

    def rgb(self, what: str = "an image") -> Any:
        """The image decoded (Pillow) as RGB; InvalidRequest naming `what` when it does not decode."""
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(self.data)) as picture:
                return picture.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise InvalidRequest(f"{what} ({self.media_type}) does not decode: {exc}") from None


def data_url_bytes(url: str, param: str) -> bytes:
    """The bytes a `data:` URL holds (base64 or percent-encoded); InvalidRequest naming `param` if malformed."""
    head, sep, payload = url[5:].partition(",")
    if not sep:
        raise InvalidRequest("a data URL needs a ',' before its data", param=param)
    return base64_bytes(payload, param) if head.endswith(";base64") else unquote_to_bytes(payload)


def base64_bytes(text: str, param: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("the image's base64 does not decode", param=param) from None


@dataclass(frozen=True)
class VisionSpec:
    """A vision model's image placeholder: `placeholder` is the text a rendered prompt holds for each image; the
    tokenize step replaces each with `image_text` (None: the placeholder `tokens_per_image` times; Gemma 3's:
    its begin-of-image marker, the image's soft tokens, its end marker, between blank lines, as its processor
    writes it), so that each image takes `tokens_per_image` tokens `token_id` (1: the backend expands it
    itself, as vLLM does)."""

    placeholder: str
    token_id: int
    tokens_per_image: int = 1
    image_text: str | None = None

    @property
    def expansion(self) -> str:
        return self.image_text if self.image_text is not None else self.placeholder * self.tokens_per_image

    def expand(self, text: str) -> str:
        """`text` with each placeholder replaced by its image's tokens' text."""
        expansion = self.expansion
        return text if expansion == self.placeholder else text.replace(self.placeholder, expansion)


def expanded(text: str, images: tuple[ImageInput, ...], vision: VisionSpec | None, model: str, param: str) -> str:
    """The prompt's text with each image placeholder expanded (VisionSpec.expand). InvalidRequest naming `param`
    when the model has no vision, or when the placeholders and the images do not pair up."""
    if vision is None:
        if images:
            raise InvalidRequest(f"model '{model}' has no vision: it takes text only, not images", param=param)
        return text
    found = text.count(vision.placeholder)
    if found != len(images):
        raise InvalidRequest(f"the prompt holds {found} image placeholder(s) ({vision.placeholder!r}) for "
                             f"{len(images)} image(s)", param=param)
    return vision.expand(text) if images else text


def check_image_tokens(ids: tuple[int, ...], images: tuple[ImageInput, ...], vision: VisionSpec | None,
                       param: str) -> None:
    """InvalidRequest naming `param` unless the tokenized prompt holds each image's tokens (and no more: a
    prompt that spells out an image token itself)."""
    if vision is None:
        return
    found, want = ids.count(vision.token_id), len(images) * vision.tokens_per_image
    if found != want:
        raise InvalidRequest(f"the prompt holds {found} image token(s) for {len(images)} image(s) of "
                             f"{vision.tokens_per_image} token(s) each", param=param)

"""A conversation's images -> the engine's `ImageInput`s: data URLs decoded, http(s) URLs fetched from the
origins an admin allow-lists (`conch serve --image-allow-origin`), within a size, type and time bound.

Every face writes an image as OpenAI chat's part, `{"type": "image_url", "image_url": {"url": ...}}`, in its
message's content; `Conversation.image_paths` names each one's field on the face's wire, in order, for a 400.
A fetch follows a redirect only to an allow-listed origin (each hop is checked as the first was), reads at most
`max_bytes`, and takes at most `timeout_s` in all; an origin's host must resolve to public addresses unless the
admin listed it as private (agents/mcp/policy.py's `OriginPolicy`, the same check MCP's server URLs pass).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator
from urllib.parse import urljoin

import httpx2

from conch.agents.mcp.policy import OriginPolicy, origin_of
from conch.agents.mcp.types import McpFailure
from conch.engine.errors import InvalidRequest
from conch.engine.images import MAX_IMAGE_BYTES, ImageInput, data_url_bytes


@dataclass(frozen=True)
class ImagePolicy:
    """Where image URLs may be fetched from, and the bounds of a fetch (app state; the CLI's --image-* flags)."""

    origins: OriginPolicy = field(default_factory=OriginPolicy)
    max_bytes: int = MAX_IMAGE_BYTES
    timeout_s: float = 10.0
    max_redirects: int = 3

    @classmethod
    def of(cls, public: Iterable[str] = (), private: Iterable[str] = (), max_bytes: int | None = None,
           timeout_s: float | None = None) -> "ImagePolicy":
        return cls(OriginPolicy.of(public, private), max_bytes or MAX_IMAGE_BYTES, timeout_s or 10.0)


def image_parts(messages: Iterable[dict[str, Any]], paths: tuple[str, ...],
                messages_path: str) -> Iterator[tuple[str, str]]:
    """(wire path, url) of each image part, in prompt order. `paths`: the face's own, where it gave them."""
    n = 0
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, dict) and part.get("type") == "image_url":
                where = paths[n] if n < len(paths) else f"{messages_path}.{i}.content.{j}"
                n += 1
                yield where, part["image_url"]["url"]


async def read_images(parts: list[tuple[str, str]], policy: ImagePolicy) -> tuple[ImageInput, ...]:
    """Each part's image, fetched concurrently; InvalidRequest naming the part for any that fails."""
    return tuple(await asyncio.gather(*(read_image(url, where, policy) for where, url in parts)))


async def read_image(url: str, param: str, policy: ImagePolicy) -> ImageInput:
    if url.startswith("data:"):
        return ImageInput.of(data_url_bytes(url, param), param, policy.max_bytes)
    try:
        async with asyncio.timeout(policy.timeout_s):
            data = await _fetch(url, param, policy)
    except TimeoutError:
        raise InvalidRequest(f"fetching the image took over {policy.timeout_s:g} s", param=param) from None
    except httpx2.HTTPError as exc:
        raise InvalidRequest(f"the image could not be fetched ({type(exc).__name__})", param=param) from None
    return ImageInput.of(data, param, policy.max_bytes)


async def _allowed(url: str, param: str, policy: ImagePolicy) -> None:
    try:
        origin = origin_of(url)
    except ValueError as exc:
        raise InvalidRequest(f"the image URL is not a data URL or an http(s) URL with a host ({exc})",
                             param=param) from None
    if origin not in policy.origins.allowed:
        raise InvalidRequest(f"image URL origin {origin} is not in the gateway's image allow-list "
                             f"(conch serve --image-allow-origin); send the image as a data URL", param=param)
    try:
        await policy.origins.check(url)
    except McpFailure as exc:
        raise InvalidRequest(exc.reason.replace("server_url", "image URL"), param=param) from None


async def _fetch(url: str, param: str, policy: ImagePolicy) -> bytes:
    """The body at `url`, through at most `max_redirects` redirects, each to an allowed origin."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=policy.timeout_s) as client:
        for _ in range(policy.max_redirects + 1):
            await _allowed(url, param, policy)
            async with client.stream("GET", url, headers={"Accept": "image/*"}) as response:
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code != 200:
                    raise InvalidRequest(f"fetching the image answered HTTP {response.status_code}", param=param)
                return await _body(response, param, policy.max_bytes)
    raise InvalidRequest(f"fetching the image took over {policy.max_redirects} redirects", param=param)


async def _body(response: httpx2.Response, param: str, max_bytes: int) -> bytes:
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and not kind.startswith("image/") and kind != "application/octet-stream":
        raise InvalidRequest(f"the image URL answered {kind}, not an image", param=param)
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise InvalidRequest(f"the image is {declared} bytes, over the limit of {max_bytes}", param=param)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise InvalidRequest(f"the image is over the limit of {max_bytes} bytes", param=param)
    return bytes(body)

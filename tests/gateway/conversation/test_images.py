"""gateway/conversation/images.py: data URLs decoded, image URLs fetched only from allow-listed origins, within
their bounds, never through a redirect off the list (a real HTTP server on loopback)."""
from __future__ import annotations

import base64
import http.server
import threading
import time
from typing import Iterator

import pytest

from conch.engine.errors import InvalidRequest
from conch.engine.images import ImageInput, sniff
from conch.gateway.conversation.images import ImagePolicy, image_parts, read_image

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x01" * 40


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        status, headers, body = self.routes.get(self.path, (404, {}, b""))
        if self.path == "/slow":
            time.sleep(1.5)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):          # the client stopped reading: a bound held
            pass

    def log_message(self, *args) -> None:
        pass


def _serve(routes) -> Iterator[str]:
    handler = type("Handler", (_Handler,), {"routes": routes})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def other() -> Iterator[str]:
    """A second origin, never allow-listed."""
    yield from _serve({"/a.png": (200, {"Content-Type": "image/png"}, PNG)})


@pytest.fixture(scope="module")
def origin(other: str) -> Iterator[str]:
    yield from _serve({
        "/a.png": (200, {"Content-Type": "image/png"}, PNG),
        "/big.png": (200, {"Content-Type": "image/png"}, PNG + b"\x00" * 4096),
        "/page": (200, {"Content-Type": "text/html"}, b"<html></html>"),
        "/slow": (200, {"Content-Type": "image/png"}, PNG),
        "/here": (302, {"Location": "/a.png"}, b""),
        "/away": (302, {"Location": f"{other}/a.png"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
    })


def _read(url: str, policy: ImagePolicy | None = None) -> ImageInput:
    import asyncio

    return asyncio.run(read_image(url, "messages.0.content.1", policy or ImagePolicy()))


def test_data_urls_decode_and_the_type_comes_from_the_bytes():
    image = _read("data:image/jpeg;base64," + base64.b64encode(PNG).decode())
    assert image.media_type == "image/png" and image.data == PNG     # the client's claim is not trusted
    assert image.digest == _read("data:image/png;base64," + base64.b64encode(PNG).decode()).digest
    assert sniff(JPEG) == "image/jpeg" and sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    for url, words in [("data:image/png;base64,@@@", "base64"), ("data:image/png;base64", "','"),
                       ("data:text/plain;base64," + base64.b64encode(b"hello").decode(), "image/png"),
                       ("data:image/png;base64,", "empty")]:
        with pytest.raises(InvalidRequest, match=words) as refused:
            _read(url)
        assert refused.value.param == "messages.0.content.1"


def test_an_origin_off_the_list_is_never_fetched(origin):
    with pytest.raises(InvalidRequest, match="allow-list"):
        _read(f"{origin}/a.png")                        # no list: data URLs only
    with pytest.raises(InvalidRequest, match="not a data URL or an http"):
        _read("file:///etc/passwd", ImagePolicy.of([origin]))


def test_an_allowed_origin_is_fetched_and_redirects_stay_on_the_list(origin, other):
    policy = ImagePolicy.of([origin])
    assert _read(f"{origin}/a.png", policy).data == PNG
    assert _read(f"{origin}/here", policy).data == PNG              # a redirect within the list
    with pytest.raises(InvalidRequest, match=f"origin {other} is not in the gateway's image allow-list"):
        _read(f"{origin}/away", policy)
    assert _read(f"{origin}/away", ImagePolicy.of([origin, other])).data == PNG
    with pytest.raises(InvalidRequest, match="redirects"):
        _read(f"{origin}/loop", policy)


def test_fetch_bounds(origin):
    with pytest.raises(InvalidRequest, match="over the limit of 1024"):
        _read(f"{origin}/big.png", ImagePolicy.of([origin], max_bytes=1024))
    with pytest.raises(InvalidRequest, match="text/html, not an image"):
        _read(f"{origin}/page", ImagePolicy.of([origin]))
    with pytest.raises(InvalidRequest, match="HTTP 404"):
        _read(f"{origin}/missing.png", ImagePolicy.of([origin]))
    with pytest.raises(InvalidRequest, match="over 0.5 s"):
        _read(f"{origin}/slow", ImagePolicy.of([origin], timeout_s=0.5))


def test_image_parts_name_the_face_paths_in_prompt_order():
    messages = [{"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "a"},
                                             {"type": "image_url", "image_url": {"url": "data:x"}}]},
                {"role": "tool", "content": [{"type": "image_url", "image_url": {"url": "data:y"}}]}]
    assert list(image_parts(messages, (), "messages")) == [("messages.1.content.1", "data:x"),
                                                            ("messages.2.content.0", "data:y")]
    assert [p for p, _ in image_parts(messages, ("input.0.content.1",), "input")] == \
        ["input.0.content.1", "input.2.content.0"]

"""Images on every face, through the real openai and anthropic SDKs and tritonclient against a real server: the
tiny Llava (builtin:tiny-llava, 16 tokens an image) reads them, as data URLs or fetched from an allow-listed
origin (chat, Responses, Messages) or as Triton's `image` input (/v2 infer and generate), and usage counts each
image's tokens; a text-only model refuses an image with a 400 that names the part and says it has no vision.
The tiny Gemma 3 (builtin:tiny-gemma3) answers both SDKs with an image too, its prompt as Gemma3Processor
writes it, and tritonclient's image input too."""
from __future__ import annotations

import base64
import http.server
import io
import threading

import anthropic
import httpx
import numpy as np
import openai
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from PIL import Image
from transformers import AutoProcessor, AutoTokenizer

from conch.engine.weights.tiny_gemma3 import ensure_tiny_gemma3
from conch.engine.weights.tiny_llava import ensure_tiny_llava
from tests.conftest import start_server, write_repository
from tests.images import data_url, picture

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
SHOT = picture(3)                     # a real PNG
VLM, N = "llava", 16
GEMMA = "gemma"


class _Images(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(SHOT)))
        self.end_headers()
        self.wfile.write(SHOT)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def origin():
    images = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{images.server_address[1]}"
    images.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory, origin):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32"},
                            VLM: {"weights": "builtin:tiny-llava", "dtype": "float32"},
                            GEMMA: {"weights": "builtin:tiny-gemma3", "dtype": "float32"}})
    server = start_server(["--model-repository", str(root), "--image-allow-origin", origin], root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def claude(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    yield client
    client.close()


def test_a_text_only_model_refuses_an_image_on_chat(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model="tiny", max_tokens=2, messages=[
            {"role": "system", "content": "look"},
            {"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                         {"type": "image_url", "image_url": {"url": DATA_URL}}]}])
    error = refused.value.body
    assert error["param"] == "messages.1.content.1" and "no vision" in error["message"]


def test_a_text_only_model_refuses_an_image_on_responses(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="tiny", max_output_tokens=2, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "what is it?"},
                                         {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}]}])
    error = refused.value.body
    assert error["param"] == "input.0.content.1" and "no vision" in error["message"]


def test_a_text_only_model_refuses_an_image_on_messages(claude):
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}}]}])
    assert "no vision" in refused.value.message and "messages.0.content.1" in refused.value.message


def test_other_parts_are_still_named(oai):
    with pytest.raises(openai.BadRequestError, match="input_audio"):
        oai.chat.completions.create(model="tiny", max_tokens=2, messages=[{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}])
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="tiny", max_output_tokens=2, input=[
            {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}])
    assert refused.value.body["param"] == "input.0.content.0.file_id"


def _chat(oai, parts, **kwargs):
    return oai.chat.completions.create(model=VLM, max_tokens=3, temperature=0, messages=[
        {"role": "user", "content": [{"type": "text", "text": "what is on the screen?"}, *parts]}], **kwargs)


def test_chat_reads_an_image_and_counts_its_tokens(oai, origin):
    text = _chat(oai, [])
    seen = _chat(oai, [{"type": "image_url", "image_url": {"url": data_url(SHOT), "detail": "high"}}])
    assert seen.choices[0].finish_reason == "length"
    assert seen.usage.prompt_tokens == text.usage.prompt_tokens + N
    fetched = _chat(oai, [{"type": "image_url", "image_url": {"url": f"{origin}/shot.png"}}])
    assert fetched.usage.prompt_tokens == seen.usage.prompt_tokens
    assert fetched.choices[0].message.content == seen.choices[0].message.content      # the same image, greedy
    two = _chat(oai, [{"type": "image_url", "image_url": {"url": data_url(SHOT)}},
                      {"type": "image_url", "image_url": {"url": data_url(picture(4, 64, 64, "JPEG"),
                                                                          "image/jpeg")}}])
    assert two.usage.prompt_tokens == text.usage.prompt_tokens + 2 * N
    streamed = list(_chat(oai, [{"type": "image_url", "image_url": {"url": data_url(SHOT)}}], stream=True,
                          stream_options={"include_usage": True}))
    assert streamed[-1].usage.prompt_tokens == seen.usage.prompt_tokens


def test_chat_refuses_an_unlisted_origin_and_a_broken_image(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        _chat(oai, [{"type": "image_url", "image_url": {"url": "http://203.0.113.9/a.png"}}])
    assert refused.value.body["param"] == "messages.0.content.1" and "allow-list" in refused.value.body["message"]
    with pytest.raises(openai.BadRequestError, match="does not decode"):
        _chat(oai, [{"type": "image_url", "image_url": {"url": DATA_URL}}])      # PNG's magic, then nothing


def test_responses_reads_an_input_image(oai, origin):
    text = oai.responses.create(model=VLM, max_output_tokens=3, temperature=0, input="describe it")
    seen = oai.responses.create(model=VLM, max_output_tokens=3, temperature=0, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "describe it"},
                                     {"type": "input_image", "image_url": data_url(SHOT), "detail": "auto"}]}])
    assert seen.status == "incomplete" and seen.usage.input_tokens == text.usage.input_tokens + N
    fetched = oai.responses.create(model=VLM, max_output_tokens=3, temperature=0, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "describe it"},
                                     {"type": "input_image", "image_url": f"{origin}/shot.png"}]}])
    assert fetched.output_text == seen.output_text


def _claude(claude, blocks, **kwargs):
    return claude.messages.create(model=VLM, max_tokens=3, messages=[
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, *blocks]}], **kwargs)


def test_messages_reads_image_blocks(claude, origin):
    text = _claude(claude, [])
    seen = _claude(claude, [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                          "data": base64.b64encode(SHOT).decode()}}])
    assert seen.usage.input_tokens == text.usage.input_tokens + N
    fetched = _claude(claude, [{"type": "image", "source": {"type": "url", "url": f"{origin}/shot.png"}}])
    assert fetched.usage.input_tokens == seen.usage.input_tokens
    counted = claude.messages.count_tokens(model=VLM, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "url", "url": f"{origin}/shot.png"}}]}])
    assert counted.input_tokens == seen.usage.input_tokens


def test_messages_reads_a_screenshot_in_a_tool_result(claude):
    """Claude Code's Read of an image file answers with an image block inside the tool_result."""
    message = claude.messages.create(model=VLM, max_tokens=3, messages=[
        {"role": "user", "content": "read shot.png"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                           "input": {"file_path": "shot.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(SHOT).decode()}}]}]}],
        tools=[{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}])
    assert message.usage.input_tokens > N
    with pytest.raises(anthropic.BadRequestError, match="document"):
        _claude(claude, [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}])


def _gemma_prompt_tokens(text: str, image: bytes) -> int:
    """The prompt's tokens as Gemma 3's own processor writes a user turn of `text` then the image."""
    processor = AutoProcessor.from_pretrained(ensure_tiny_gemma3())
    rendered = processor.tokenizer.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]}],
        tokenize=False, add_generation_prompt=True)
    inputs = processor(text=[rendered], images=[[Image.open(io.BytesIO(image)).convert("RGB")]],
                       add_special_tokens=False)
    return len(inputs["input_ids"][0])


def test_gemma3_answers_the_openai_sdk_with_an_image(oai):
    def ask(image: bytes):
        return oai.chat.completions.create(model=GEMMA, max_tokens=3, temperature=0, logprobs=True, messages=[
            {"role": "user", "content": [{"type": "text", "text": "what is on the screen?"},
                                         {"type": "image_url", "image_url": {"url": data_url(image)}}]}])

    seen, other = ask(SHOT), ask(picture(9))
    assert seen.choices[0].finish_reason == "length"
    assert seen.usage.prompt_tokens == _gemma_prompt_tokens("what is on the screen?", SHOT)
    assert [t.logprob for t in seen.choices[0].logprobs.content] != \
        [t.logprob for t in other.choices[0].logprobs.content]           # the image reaches the answer
    assert [t.logprob for t in ask(SHOT).choices[0].logprobs.content] == \
        [t.logprob for t in seen.choices[0].logprobs.content]


def test_gemma3_answers_the_anthropic_sdk_with_an_image(claude):
    blocks = [{"type": "text", "text": "what is this?"},
              {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": base64.b64encode(SHOT).decode()}}]
    message = claude.messages.create(model=GEMMA, max_tokens=3, messages=[{"role": "user", "content": blocks}])
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3
    assert message.usage.input_tokens == _gemma_prompt_tokens("what is this?", SHOT)
    counted = claude.messages.count_tokens(model=GEMMA, messages=[{"role": "user", "content": blocks}])
    assert counted.input_tokens == message.usage.input_tokens


def _triton_inputs(prompt: str, images: list[bytes]) -> list:
    text = httpclient.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    flags = []
    for name in ("exclude_input_in_output", "return_num_input_tokens"):
        flag = httpclient.InferInput(name, [1], "BOOL")
        flag.set_data_from_numpy(np.array([True]))
        flags.append(flag)
    params = httpclient.InferInput("sampling_parameters", [1], "BYTES")
    params.set_data_from_numpy(np.array([b'{"max_tokens": 3, "temperature": 0}'], dtype=np.object_))
    inputs = [text, params, *flags]
    if images:
        image = httpclient.InferInput("image", [len(images)], "BYTES")
        image.set_data_from_numpy(np.array([base64.b64encode(i) for i in images], dtype=np.object_))
        inputs.append(image)
    return inputs


def test_triton_infer_takes_the_image_input(server):
    """As Triton's vLLM backend takes it for Llava: BYTES [-1], each image in base64."""
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    inputs = {i["name"]: i for i in client.get_model_metadata(VLM)["inputs"]}
    assert inputs["image"]["datatype"] == "BYTES" and inputs["image"]["shape"] == [-1]
    ask = "USER: <image>\nWhat is shown? ASSISTANT:"
    seen = client.infer(VLM, _triton_inputs(ask, [SHOT]))
    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_llava())
    assert seen.as_numpy("num_input_tokens")[0] == len(tokenizer.encode(ask)) - 1 + N     # <image> is one token
    implicit = client.infer(VLM, _triton_inputs("What is shown?", [SHOT]))   # no placeholder: one at the start
    assert implicit.as_numpy("num_input_tokens")[0] > N
    with pytest.raises(InferenceServerException, match="no vision"):
        client.infer("tiny", _triton_inputs(ask, [SHOT]))


def test_triton_generate_takes_the_image_input(server):
    body = {"text_input": "USER: <image>\nWhat is shown? ASSISTANT:", "image": [data_url(SHOT)],
            "parameters": {"max_tokens": 3, "return_num_input_tokens": True}}
    r = httpx.post(f"{server.url}/v2/models/{VLM}/generate", json=body, timeout=60)
    assert r.status_code == 200 and r.json()["num_input_tokens"] > N
    bad = httpx.post(f"{server.url}/v2/models/{VLM}/generate", json={**body, "image": ["@@not base64"]}, timeout=60)
    assert bad.status_code == 400 and "base64" in bad.json()["error"]


def test_triton_infer_gives_gemma3_its_image(server):
    """No placeholder in the text: one at its start, expanded as Gemma 3's processor writes an image."""
    client = httpclient.InferenceServerClient(server.url.removeprefix("http://"))
    seen = client.infer(GEMMA, _triton_inputs("What is shown?", [SHOT]))
    processor = AutoProcessor.from_pretrained(ensure_tiny_gemma3())
    want = processor(text=["<start_of_image>\nWhat is shown?"], images=[[Image.open(io.BytesIO(SHOT)).convert("RGB")]])
    assert seen.as_numpy("num_input_tokens")[0] == len(want["input_ids"][0])

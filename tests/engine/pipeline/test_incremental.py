import pytest
from transformers import AutoTokenizer

from conch.engine.pipeline.incremental import IncrementalDetokenizer
from conch.engine.weights import ensure_smollm2


@pytest.fixture(scope="module")
def fast_tokenizer():
    return AutoTokenizer.from_pretrained(ensure_smollm2())


class _DecodeOnly:
    """The tokenizer seen through `decode` alone: the detokenizer's window path (no DecodeStream)."""

    def __init__(self, tokenizer) -> None:
        self.decode = tokenizer.decode


@pytest.fixture(scope="module", params=["stream", "window"])
def tokenizer(request, fast_tokenizer):
    return fast_tokenizer if request.param == "stream" else _DecodeOnly(fast_tokenizer)


@pytest.mark.parametrize("text", [
    "Hello, world!", "  leading spaces and trailing  ", "naïve café — 東京 🚀🎉 ok", "a\nb\n\n  c", "<|im_end|> x",
])
def test_incremental_text_equals_full_decode(tokenizer, fast_tokenizer, text):
    ids = fast_tokenizer.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer)
    pieces = [detok.add(i) for i in ids]
    pieces.append(detok.flush())
    assert "".join(pieces) == fast_tokenizer.decode(ids, skip_special_tokens=True)
    assert all("\ufffd" not in p for p in pieces)


def test_multibyte_character_is_never_split(tokenizer, fast_tokenizer):
    ids = fast_tokenizer.encode("🚀", add_special_tokens=False)
    assert len(ids) > 1                        # the emoji spans several byte-level tokens
    detok = IncrementalDetokenizer(tokenizer)
    assert [detok.add(i) for i in ids] == [""] * (len(ids) - 1) + ["🚀"]


def test_a_character_cut_short_at_the_end_flushes_as_the_replacement_character(tokenizer, fast_tokenizer):
    ids = fast_tokenizer.encode("ok 🚀", add_special_tokens=False)[:-1]
    detok = IncrementalDetokenizer(tokenizer)
    text = "".join(detok.add(i) for i in ids)
    assert text == "ok" and detok.flush().startswith(" \ufffd")


def test_an_id_the_tokenizer_lacks_decodes_to_nothing_as_in_a_full_decode(tokenizer, fast_tokenizer):
    """A model's vocabulary may be padded past its tokenizer's: such an id adds no text on either path."""
    ids = fast_tokenizer.encode("Hello there", add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer)
    text = detok.add(ids[0]) + detok.add(10**7) + detok.add(ids[1]) + detok.flush()
    assert text == fast_tokenizer.decode([ids[0], 10**7, ids[1]]) == "Hello there"

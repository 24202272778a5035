import pytest
from transformers import AutoTokenizer

from engine.pipeline.incremental import IncrementalDetokenizer
from engine.models import ensure_smollm2


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(ensure_smollm2())


@pytest.mark.parametrize("text", [
    "Hello, world!", "  leading spaces and trailing  ", "naïve café — 東京 🚀🎉 ok", "a\nb\n\n  c", "<|im_end|> x",
])
def test_incremental_text_equals_full_decode(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer)
    pieces = [detok.add(i) for i in ids]
    pieces.append(detok.flush())
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)
    assert all("\ufffd" not in p for p in pieces)


def test_multibyte_character_is_never_split(tokenizer):
    ids = tokenizer.encode("🚀", add_special_tokens=False)
    assert len(ids) > 1                        # the emoji spans several byte-level tokens
    detok = IncrementalDetokenizer(tokenizer)
    assert [detok.add(i) for i in ids] == [""] * (len(ids) - 1) + ["🚀"]

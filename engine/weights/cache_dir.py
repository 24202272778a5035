"""Where converted and locally built models live: $CONCH_CACHE, default ~/.cache/conch."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    root = Path(os.environ.get("CONCH_CACHE", Path.home() / ".cache" / "conch"))
    root.mkdir(parents=True, exist_ok=True)
    return root

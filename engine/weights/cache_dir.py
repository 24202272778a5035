"""Where converted and locally built models live: $CONCH_CACHE, default ~/.cache/conch."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

DONE = ".conch-complete"     # written last into a built folder: one without it was interrupted, and is rebuilt


def cache_dir() -> Path:
    root = Path(os.environ.get("CONCH_CACHE", Path.home() / ".cache" / "conch"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def publish(model: Any, tokenizer: Any, target: Path) -> None:
    """Save `model` and `tokenizer` as the folder `target`, whole or not at all: into a temporary sibling,
    marked DONE, then renamed over whatever `target` held."""
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / DONE).touch()
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

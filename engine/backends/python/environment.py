"""Where a model.py imports from: its version folder (so `from lib.decode import ...` finds
`<version>/lib/decode.py`) and, with Triton's `EXECUTION_ENV_PATH` parameter, a folder or a virtual
environment of packages the server lacks, for that model only.

All python models share one interpreter, so "for that model only" is kept this way: the folders are on
`sys.path` only while the model imports and initializes (`importing`), and every module loaded from them is
taken out of `sys.modules` afterwards, so a second model with its own `lib/` or another version of a package
imports its own. A model must therefore import what it needs at module level or in `initialize`, as
Triton's examples do. `$$TRITON_MODEL_DIRECTORY` in the path is the model's folder. A conda-pack archive
(Triton's usual `.tar.gz`) is refused at load by name: unpack it and name the folder.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conch.engine.errors import ModelCodeFailed
from conch.engine.repository.config import ModelConfig

ENV_KEY = "EXECUTION_ENV_PATH"


def import_paths(config: ModelConfig) -> list[Path]:
    """The folders the model imports from, first wins: its version folder, then its environment's."""
    paths = [config.version_dir] if config.version_dir is not None else []
    raw = config.parameters.get(ENV_KEY)
    if raw:
        paths.extend(_environment(config, str(raw)))
    return paths


def _environment(config: ModelConfig, raw: str) -> list[Path]:
    folder = Path(raw.replace("$$TRITON_MODEL_DIRECTORY", str(config.path or ".")))
    if not folder.is_absolute() and config.path is not None:
        folder = Path(config.path) / folder
    if not folder.is_dir():
        raise ModelCodeFailed(f"model '{config.name}': {ENV_KEY} {raw!r} is not a folder or a virtual "
                                 f"environment (archives such as conda-pack's .tar.gz are not unpacked: unpack it "
                                 f"and name the folder)")
    site = sorted(folder.glob("lib/python3*/site-packages")) + sorted(folder.glob("Lib/site-packages"))
    return site or [folder]


@contextmanager
def importing(paths: list[Path]) -> Iterator[None]:
    """`paths` first on sys.path meanwhile; the modules loaded from them are forgotten afterwards."""
    before = set(sys.modules)
    sys.path[:0] = [str(p) for p in paths]
    try:
        yield
    finally:
        for p in paths:
            if str(p) in sys.path:
                sys.path.remove(str(p))
        roots = [p.resolve() for p in paths]
        for name in set(sys.modules) - before:
            file = getattr(sys.modules[name], "__file__", None)
            if file and any(Path(file).resolve().is_relative_to(r) for r in roots):
                del sys.modules[name]

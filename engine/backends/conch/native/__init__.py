"""Conch's own CPU kernels, compiled on first use with torch's C++ extension builder and cached on disk
(TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions): a restart does not compile again.

Each kernel is optional: without a C++ compiler, or with CONCH_NATIVE_KERNELS=0, `load` returns None and the
caller keeps its torch path."""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
STALE_LOCK_S = 900     # a build lock older than this was left by a build that died: torch would wait on it forever
FLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp"]   # -fopenmp: at::parallel_for uses torch's libgomp


@functools.cache
def load(name: str) -> Any:
    """The compiled module of `<name>.cpp` beside this file, or None when it cannot be built here."""
    if os.environ.get("CONCH_NATIVE_KERNELS", "1") == "0":
        return None
    try:
        import ninja                                      # the build tool, from pip: put it where torch looks
        import torch
        from torch.utils import cpp_extension

        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        log.info("loading the native kernel %s (compiled once, then cached)", name)
        build, source = _content_addressed(name, torch)
        _clear_stale_lock(build)
        return cpp_extension.load(name=build, sources=[str(source)], extra_cflags=FLAGS,
                                  extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as exc:                              # no compiler, no ninja: the torch path serves
        log.warning("native kernel %s unavailable, using torch's: %s", name, exc)
        return None


def _content_addressed(name: str, torch: Any) -> tuple[str, Path]:
    """The build's name and the source it compiles, keyed by the source's bytes, the flags and the torch that
    builds it (its version and where it is installed: its headers' path is part of the command). torch's builder
    reuses a build folder by name and rebuilds whenever its command changes: two checkouts or venvs sharing the
    cache under one name rebuilt each other's modules on every load, holding the lock meanwhile. A copy of the
    source inside its own build folder gives every load of the same bytes by the same torch the same command.
    The headers beside the sources (packed_product.h) are part of the key and copied beside it."""
    from torch.utils import cpp_extension

    text = (HERE / f"{name}.cpp").read_bytes()
    headers = {h.name: h.read_bytes() for h in sorted(HERE.glob("*.h"))}
    key = b"\0".join([text, *headers.values(), " ".join(FLAGS).encode(), torch.__version__.encode(),
                      torch.__file__.encode()])
    digest = hashlib.sha256(key).hexdigest()[:12]
    torch_tag = re.sub(r"\W", "_", torch.__version__)
    build = f"conch_{name}_{torch_tag}_{digest}"
    source = Path(cpp_extension._get_build_directory(build, verbose=False)) / f"{name}.cpp"
    for path, data in [*((source.parent / n, b) for n, b in headers.items()), (source, text)]:
        if not path.exists() or path.read_bytes() != data:
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(data)
            partial.replace(path)                 # atomic: a concurrent load never compiles half a file
    return build, source


def _clear_stale_lock(build: str) -> None:
    """torch's builder holds a lock file in the build folder while it compiles; a build killed meanwhile leaves
    it behind, and every later load waits on it without end. One older than STALE_LOCK_S goes."""
    from torch.utils import cpp_extension

    lock = Path(cpp_extension._get_build_directory(build, verbose=False)) / "lock"
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            log.warning("native kernel %s: removing a build lock left by a build that died (%s)", build, lock)
            lock.unlink(missing_ok=True)
    except FileNotFoundError:
        pass

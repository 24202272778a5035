"""Conch's own CPU kernels, compiled on first use with torch's C++ extension builder and cached on disk
(TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions): a restart does not compile again.

Each kernel is optional: without a C++ compiler, or with CONCH_NATIVE_KERNELS=0, `load` returns None and the
caller keeps its torch path."""
from __future__ import annotations

import functools
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
        # torch's cache is keyed by the sources and flags, not by torch: name the build after torch's version
        # so that another venv's torch (.venv-vllm) never loads a module built against this one
        version = re.sub(r"\W", "_", torch.__version__)
        _clear_stale_lock(f"conch_{name}_{version}")
        return cpp_extension.load(name=f"conch_{name}_{version}", sources=[str(HERE / f"{name}.cpp")],
                                  extra_cflags=FLAGS, extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as exc:                              # no compiler, no ninja: the torch path serves
        log.warning("native kernel %s unavailable, using torch's: %s", name, exc)
        return None


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

"""Conch's own CPU kernels, compiled on first use with torch's C++ extension builder and cached on disk
(TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions): a restart does not compile again.

Each kernel is optional: without a C++ compiler, or with CONCH_NATIVE_KERNELS=0, `load` returns None and the
caller keeps its torch path."""
from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
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
        return cpp_extension.load(name=f"conch_{name}_{version}", sources=[str(HERE / f"{name}.cpp")],
                                  extra_cflags=FLAGS, extra_ldflags=["-fopenmp"], verbose=False)
    except Exception as exc:                              # no compiler, no ninja: the torch path serves
        log.warning("native kernel %s unavailable, using torch's: %s", name, exc)
        return None

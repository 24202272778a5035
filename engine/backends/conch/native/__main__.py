"""`python -m conch.engine.backends.conch.native`: build (or find cached) every native kernel, so that the
first server start or test does not pay the compile; exits 1 when one cannot be built here."""
from __future__ import annotations

import logging
import sys
import time

from conch.engine.backends.conch.native import HERE, load

logging.basicConfig(level=logging.INFO, format="%(message)s")
failed = []
for source in sorted(HERE.glob("*.cpp")):
    start = time.perf_counter()
    module = load(source.stem)
    print(f"{source.stem}: {'ready' if module is not None else 'NOT BUILT'} in {time.perf_counter() - start:.1f} s")
    if module is None:
        failed.append(source.stem)
sys.exit(1 if failed else 0)

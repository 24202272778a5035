"""Runs every tests/bench/bench_*.py (or those named on the command line) and prints their figures."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def main() -> None:
    os.environ.setdefault("CONCH_TEST_FORK", "0")     # servers started as users start them (tests/server_fork.py)
    here = Path(__file__).parent
    names = sys.argv[1:] or sorted(p.stem for p in here.glob("bench_*.py"))
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        importlib.import_module(f"tests.bench.{name}").main()


if __name__ == "__main__":
    main()

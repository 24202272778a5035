"""Compile and mask timings per library over the schema suite (the figures in docs/structured-outputs.md).

    .venv/bin/python -m tests.grammars.measure [library ...]

Validate: `validate(spec, library)` with its memo cleared. Cold: `compile` on an empty cache
(the library's own check + build; the meta-schema check is memoised by then). Cached: `compile`
again (a cache hit). First mask: the first `fill_bitmask` of a fresh matcher (llguidance builds
its lexer lazily here). Per token: the later `fill_bitmask` calls of seeded random walks.
Medians over the schemas each library accepts. Not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import statistics
import sys
import time

from conch.grammars import GrammarCompiler, GrammarError, JsonSchema, allocate_bitmask, available_libraries, validate
from conch.grammars.schema_check import prepared_schema

from .conftest import load_info
from .drive import allowed_ids
from .schemas import SCHEMAS


def _mask_times(compiled, info, steps: int = 60) -> list[float]:
    """Seconds per fill_bitmask along one random walk (first token of each schema included)."""
    import random

    rng, matcher, bitmask, times = random.Random(0), compiled.matcher(), allocate_bitmask(1, info.vocab_size), []
    for _ in range(steps):
        if matcher.is_finished():
            break
        start = time.perf_counter()
        matcher.fill_bitmask(bitmask, 0)
        times.append(time.perf_counter() - start)
        choices = allowed_ids(bitmask[0].numpy(), info.vocab_size).nonzero()[0]
        matcher.accept(int(choices[rng.randrange(len(choices))]))
    return times


def measure(library: str) -> dict[str, float]:
    info = load_info()
    compiler = GrammarCompiler(info, library, cache_size=len(SCHEMAS))
    checks, cold, cached, firsts, masks, accepted = [], [], [], [], [], 0
    for case in SCHEMAS:
        spec = JsonSchema.from_dict(case.schema)
        prepared_schema.cache_clear()
        start = time.perf_counter()
        try:
            validate(spec, library)
        except GrammarError:
            continue
        checks.append(time.perf_counter() - start)
        accepted += 1
        start = time.perf_counter()
        compiled = compiler.compile(spec)
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        compiler.compile(spec)
        cached.append(time.perf_counter() - start)
        times = _mask_times(compiled, info)
        firsts.append(times[0])
        masks += times[1:]
    return {
        "schemas": accepted,
        "validate_median_ms": statistics.median(checks) * 1e3,
        "cold_median_ms": statistics.median(cold) * 1e3,
        "cold_max_ms": max(cold) * 1e3,
        "cached_median_ms": statistics.median(cached) * 1e3,
        "first_mask_median_ms": statistics.median(firsts) * 1e3,
        "first_mask_max_ms": max(firsts) * 1e3,
        "mask_median_ms": statistics.median(masks) * 1e3,
        "mask_p95_ms": statistics.quantiles(masks, n=20)[-1] * 1e3,
    }


def main(libraries: list[str]) -> None:
    for library in libraries or available_libraries():
        figures = measure(library)
        print(library, " ".join(f"{key}={value:.3f}" for key, value in figures.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

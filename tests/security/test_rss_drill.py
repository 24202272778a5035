"""Issue 43: the gateway's RSS after the fuzz and load drills stays under 1.3 GB, with the default models (the
drill is tests/bench/bench_fuzz_rss.py's: every face's fuzz bodies, then conversations past the record store's
bound and stored responses, whole and streamed). Long: `make test-slow` runs it."""
from __future__ import annotations

import pytest

from tests.bench import bench_fuzz_rss


@pytest.mark.slow
def test_rss_after_the_fuzz_and_load_drills_stays_under_the_bound(tmp_path):
    server = bench_fuzz_rss.start(tmp_path)
    try:
        figures = bench_fuzz_rss.drill(server)
    finally:
        server.stop()
    print(figures.line())
    assert figures.record_evictions > 0, figures.line()          # the load filled the record store past its bound
    assert figures.after_gb <= bench_fuzz_rss.GOAL_GB, figures.line()

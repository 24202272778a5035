"""An idle engine thread moves the weights' arena into huge pages (engine_core.py's idle wait, huge_pages.py),
a chunk at a time, and a request that comes meanwhile is still answered."""
from __future__ import annotations

import time

import httpx
import torch

from conch.engine.backends.conch.kv.huge_pages import HugePageArena


def test_an_idle_engine_thread_collapses_an_arena_into_huge_pages(tiny_inprocess, huge_kb):
    values = torch.randn(12 << 20)                                                  # 48 MB, in 4 KB pages
    held = HugePageArena().copy(values)
    answer = httpx.post(f"{tiny_inprocess.url}/v2/models/tiny/generate", timeout=60,
                        json={"text_input": "Hi", "parameters": {"max_tokens": 2}})
    assert answer.status_code == 200
    deadline = time.monotonic() + 30
    while huge_kb(held) < 48 << 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert huge_kb(held) == 48 << 10 and torch.equal(held, values)

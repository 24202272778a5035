"""A build lock left by a build that died is cleared before loading (torch would wait on it forever); a fresh
one, a build still running, is left alone."""
from __future__ import annotations

import os
import time

from conch.engine.backends.conch import native


def test_a_stale_build_lock_goes_and_a_fresh_one_stays(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale, fresh = tmp_path / "dead_build" / "lock", tmp_path / "running_build" / "lock"
    for lock in (stale, fresh):
        lock.parent.mkdir()
        lock.touch()
    old = time.time() - native.STALE_LOCK_S - 60
    os.utime(stale, (old, old))
    native._clear_stale_lock("dead_build")
    native._clear_stale_lock("running_build")
    native._clear_stale_lock("never_built")
    assert not stale.exists() and fresh.exists()


def test_a_build_is_keyed_by_its_bytes_not_its_checkout(tmp_path, monkeypatch):
    """Two checkouts of the same source share one build; other bytes get another (torch rebuilt a shared name
    on every load from another path, holding its lock)."""
    import torch

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    builds = {}
    for checkout, text in (("a", "int f();"), ("b", "int f();"), ("c", "int g();")):
        (tmp_path / checkout).mkdir()
        (tmp_path / checkout / "k.cpp").write_text(text)
        monkeypatch.setattr(native, "HERE", tmp_path / checkout)
        builds[checkout] = native._content_addressed("k", torch)
    assert builds["a"] == builds["b"] and builds["a"][0] != builds["c"][0]
    assert builds["a"][1].read_text() == "int f();" and builds["c"][1].read_text() == "int g();"

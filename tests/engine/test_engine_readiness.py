"""Engine.ready and Engine.get are the one readiness answer: a version is reachable only once its warmup ran
(its warmup's own requests excepted); a new version warming up leaves the serving one serving; a failed warmup
leaves nothing registered and stops the backend."""
from __future__ import annotations

import asyncio

import pytest

from conch.engine.engine import Engine
from conch.engine.errors import ModelNotReady
from conch.engine.repository import ModelConfig
from tests.serving_helpers import FakeBackend


class Gate:
    """A warmup that records what its own request reached, then waits for the test."""

    def __init__(self) -> None:
        self.entered, self.release, self.reached = asyncio.Event(), asyncio.Event(), []

    async def __call__(self, engine: Engine, loaded) -> None:
        self.reached.append(engine.get(loaded.name) is loaded)
        self.entered.set()
        await self.release.wait()


async def test_a_warming_model_is_not_ready_until_its_warmup_ends():
    engine, gate = Engine(backends=FakeBackend), Gate()
    loading = asyncio.create_task(engine.load("m", ModelConfig(name="m", backend="fake"), warm=gate))
    await gate.entered.wait()
    with pytest.raises(ModelNotReady, match="warming up"):
        engine.get("m")
    assert not engine.ready() and not engine.ready("m") and engine.versions("m") == []
    gate.release.set()
    loaded = await loading
    assert gate.reached == [True]                          # the warmup's own request reached the version
    assert engine.get("m") is loaded and engine.ready("m") and engine.ready()


async def test_a_new_version_warming_up_leaves_the_serving_one_serving():
    engine, gate = Engine(backends=FakeBackend), Gate()
    old = await engine.load("m", ModelConfig(name="m", backend="fake", version="1"))
    loading = asyncio.create_task(engine.load("m", ModelConfig(name="m", backend="fake", version="2"), warm=gate))
    await gate.entered.wait()
    assert engine.get("m") is old and engine.ready("m", "1") and not engine.ready("m", "2")
    gate.release.set()
    new = await loading
    assert engine.get("m") is new and engine.versions("m") == ["1", "2"]


async def test_a_failed_warmup_registers_nothing_and_stops_the_backend():
    engine, stopped = Engine(backends=FakeBackend), []

    async def fail(engine: Engine, loaded) -> None:
        loaded.backend.stop = lambda: stopped.append(True) or asyncio.sleep(0)
        raise RuntimeError("sample failed")

    with pytest.raises(RuntimeError, match="sample failed"):
        await engine.load("m", ModelConfig(name="m", backend="fake"), warm=fail)
    assert engine.versions("m") == [] and stopped == [True] and engine.ready()

"""first_started: the next attempt only while nothing has been yielded; a failure after that is final."""
from __future__ import annotations

import pytest

from conch.engine.backends.openai.backend import first_started
from conch.engine.errors import InvalidRequest, UpstreamError, UpstreamTimeout
from conch.engine.types import GenerationDelta


def _attempt(log: list, name: str, texts: tuple[str, ...], error: Exception | None = None):
    async def run():
        log.append(name)
        for text in texts:
            yield GenerationDelta("r", text=text)
        if error is not None:
            raise error
    return run


def _failed(failures):
    return UpstreamError(" | ".join(f.message for f in failures))


async def _texts(stream) -> list[str]:
    return [d.text async for d in stream]


async def test_failures_before_the_first_delta_move_on():
    log: list = []
    attempts = [_attempt(log, "a", (), UpstreamError("a down")), _attempt(log, "b", (), UpstreamTimeout("b slow")),
                _attempt(log, "c", ("hi", "!"))]
    assert await _texts(first_started(attempts, _failed)) == ["hi", "!"] and log == ["a", "b", "c"]


async def test_a_failure_after_the_first_delta_is_final():
    log: list = []
    attempts = [_attempt(log, "a", ("partial",), UpstreamError("broke off")), _attempt(log, "b", ("whole",))]
    out: list[str] = []
    with pytest.raises(UpstreamError, match="broke off"):
        async for d in first_started(attempts, _failed):
            out.append(d.text)
    assert out == ["partial"] and log == ["a"]


async def test_all_failing_raise_the_combined_error():
    log: list = []
    attempts = [_attempt(log, "a", (), UpstreamError("a down")), _attempt(log, "b", (), UpstreamError("b down"))]
    with pytest.raises(UpstreamError, match=r"a down \| b down"):
        await _texts(first_started(attempts, _failed))


async def test_a_refused_request_is_not_retried():
    log: list = []
    attempts = [_attempt(log, "a", (), InvalidRequest("bad", param="x")), _attempt(log, "b", ("hi",))]
    with pytest.raises(InvalidRequest):
        await _texts(first_started(attempts, _failed))
    assert log == ["a"]

"""collect(): a choice that failed on its own grammar is the request's 400 (InvalidRequest, through the error
table); any other failure is the engine's 500."""
from __future__ import annotations

import pytest

from conch.engine import GenerationDelta, RequestStatus
from conch.engine.errors import InvalidRequest
from conch.gateway.choices import collect
from conch.gateway.errors import APIError


async def _deltas(error_is_request: bool):
    yield GenerationDelta("r", 0, text="ok", status=RequestStatus.FINISHED_STOPPED)
    yield GenerationDelta("r", 1, status=RequestStatus.FINISHED_ERROR, error="it broke",
                          error_is_request=error_is_request)


async def test_a_grammar_dead_end_is_a_400_and_another_failure_a_500():
    with pytest.raises(InvalidRequest, match="it broke"):
        await collect(_deltas(True), 2)
    with pytest.raises(APIError) as failed:
        await collect(_deltas(False), 2)
    assert failed.value.status == 500

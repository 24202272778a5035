"""Conformance: stop strings, stop token ids, and aborts (one choice, a whole request, a dropped stream):
each choice still ends with one final delta, and the batch slots are freed."""
from __future__ import annotations

from contextlib import aclosing

from conch.engine.types import RequestStatus
from tests.engine.backends.conformance.backends import MODEL
from tests.engine.backends.conformance.drive import Choice, one, request, settled


async def test_a_stop_string_ends_the_text_before_it(engine):
    full = await one(engine, max_tokens=24, ignore_eos=True)
    middle = len(full.text) // 2
    stop = full.text[middle:middle + 4]
    assert stop.strip(), full.text
    stopped = await one(engine, max_tokens=24, ignore_eos=True, stop=(stop,))
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop
    assert stopped.text == full.text[:full.text.index(stop)]


async def test_a_stop_token_id_ends_the_choice_at_its_first_occurrence(engine):
    full = await one(engine, max_tokens=24, ignore_eos=True)
    target = full.token_ids[5]
    first = full.token_ids.index(target)
    stopped = await one(engine, max_tokens=24, ignore_eos=True, stop_token_ids=(target,))
    assert stopped.finish_reason == "stop" and stopped.stop_reason == target
    assert stopped.usage.completion_tokens == first + 1       # the stop token counts, but is not text
    assert full.text.startswith(stopped.text)


async def _abort_after_first_delta(engine, index: int | None) -> list[Choice]:
    """Runs n=2 on the backend directly (abort addresses the backend's request id), aborting choice
    `index` (None: both) once the first delta has arrived."""
    backend = engine.get(MODEL).backend
    req = await engine.prepare(request(rid="abort-me", n=2, max_tokens=64, ignore_eos=True))
    choices, aborted = [Choice(), Choice()], False
    async with aclosing(backend.generate(req)) as deltas:
        async for delta in deltas:
            choices[delta.index].add(delta)
            if not aborted:
                await backend.abort(req.id, index)
                aborted = True
    return choices


async def test_aborting_one_choice_ends_it_and_the_other_runs_on(engine):
    kept, cut = await _abort_after_first_delta(engine, 1)
    assert cut.status == RequestStatus.FINISHED_ABORTED and len(cut.token_ids) < 64
    assert kept.finish_reason == "length" and len(kept.token_ids) == 64
    assert await settled(engine) == (0, 0)


async def test_aborting_a_request_ends_every_choice_and_frees_the_slots(engine):
    choices = await _abort_after_first_delta(engine, None)
    assert [c.status for c in choices] == [RequestStatus.FINISHED_ABORTED] * 2
    assert all(len(c.token_ids) < 64 for c in choices)
    assert await settled(engine) == (0, 0)


async def test_a_dropped_stream_frees_its_slot(engine):
    async with aclosing(engine.generate(request(max_tokens=64, ignore_eos=True, stream=True))) as deltas:
        async for _ in deltas:
            assert engine.get(MODEL).backend.stats().running == 1
            break                                  # the client went away after one delta
    assert await settled(engine) == (0, 0)

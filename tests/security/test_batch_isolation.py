"""One request's parameters never fail the batch it shares.

Over a real server: hostile sampling values (a temperature of 1e-300, top_k 2**64, seeds outside 64 bits,
NaN) sent beside a normal streaming request are each clamped or refused with a 400 naming the parameter on /v1
and /v2, and the normal stream runs to its end. Below the wire (no parameter reaches it any more): the
own engine's sampler and scheduler with a row whose grammar matcher raises end only that row.
"""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import torch
from openai import AsyncOpenAI

from conch.engine.backends.conch.core.sampler import Sampler
from conch.engine.backends.conch.core.scheduler import Scheduler
from tests.engine.backends.conch.fake_runner import FakeRunner
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.types import GenerationRequest, RequestStatus, SamplingParams
from tests.conftest import start_server, write_repository

STREAM_TOKENS = 160
# (parameters, the parameter a 400 names, or None where the value is clamped and the request succeeds)
HOSTILE = [({"temperature": 1e-300}, None), ({"top_k": 2**64}, None), ({"top_k": -1, "temperature": 1e-30}, None),
           ({"seed": 2**64}, "seed"), ({"seed": -2**63 - 1}, "seed"), ({"seed": 2**64 - 1, "n": 2}, None)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16}})
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


async def _beside_a_stream(server, hostile):
    """Start a normal stream, run `hostile(client)` while it is in flight, then read the stream to its end."""
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
        body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": STREAM_TOKENS, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}
        async with http.stream("POST", "/v1/completions", json=body) as stream:
            lines = stream.aiter_lines()
            events = [await anext(lines)]
            results = await hostile(http)
            events += [line async for line in lines]
    payloads = [json.loads(e.removeprefix("data: ")) for e in events if e.startswith("data: {")]
    assert events[-2:] == ["data: [DONE]", ""] or events[-1] == "data: [DONE]"
    assert not any("error" in p for p in payloads)
    assert payloads[-1]["usage"]["completion_tokens"] == STREAM_TOKENS
    return results


def test_v1_hostile_sampling_beside_a_stream(server):
    async def hostile(http):
        client = AsyncOpenAI(base_url=server.v1, api_key="none", http_client=http, max_retries=0)
        return await asyncio.gather(*(
            client.completions.with_raw_response.create(model="tiny", prompt="Hello", max_tokens=8,
                                                        extra_body=extra)
            for extra, _ in HOSTILE), return_exceptions=True)
    results = asyncio.run(_beside_a_stream(server, hostile))
    for result, (params, refused) in zip(results, HOSTILE, strict=True):
        if refused is None:
            assert not isinstance(result, Exception), (params, result)
            completion = result.parse()
            assert all(c.finish_reason == "length" for c in completion.choices), params
        else:
            assert getattr(result, "status_code", None) == 400, (params, result)
            assert result.body["param"] == refused          # the SDK gives the error object


def test_v2_hostile_sampling_beside_a_stream(server):
    cases = [*HOSTILE[:-1], ({"top_p": "nan"}, "top_p"), ({"temperature": "inf"}, "temperature"),
             ({"seed": "1e400"}, "seed")]

    async def hostile(http):
        return await asyncio.gather(*(
            http.post("/v2/models/tiny/generate", json={"text_input": "Hello", "parameters": {"max_tokens": 8, **p}})
            for p, _ in cases))
    results = asyncio.run(_beside_a_stream(server, hostile))
    for r, (params, refused) in zip(results, cases, strict=True):
        if refused is None:
            assert r.status_code == 200, (params, r.text)
            assert r.json()["text_output"].startswith("Hello")
        else:
            assert r.status_code == 400 and refused in r.json()["error"], (params, r.text)


# -- below the wire: a row that raises inside a step ---------------------------------------------------------
V = 32


class _Tokenizer:
    def decode(self, ids):
        return "".join(chr(65 + i % 26) for i in ids)


class _Matcher:
    """Allows every token; raises where told to (a broken grammar), or, as a grammar at a dead end, allows no
    token ("mask") or refuses the one sampled ("refuse")."""

    def __init__(self, fail_in: str | None = None) -> None:
        self.fail_in = fail_in

    def fill_bitmask(self, bitmask, row: int) -> None:
        if self.fail_in == "fill_bitmask":
            raise RuntimeError("matcher exploded")
        if self.fail_in == "mask":
            bitmask[row] = 0

    def accept(self, token: int) -> bool:
        if self.fail_in == "accept":
            raise RuntimeError("matcher exploded")
        return self.fail_in != "refuse"

    def is_finished(self) -> bool:
        return False


def _seq(name: str, matcher=None, **params) -> Sequence:
    request = GenerationRequest(id=name, model="m", params=SamplingParams(max_tokens=4, **params))
    return Sequence(request=request, index=0, prompt_ids=[1, 2, 3], eos_ids=frozenset(), max_total=64,
                    generator=torch.Generator().manual_seed(7), matcher=matcher)


def _step(seqs: list[Sequence], logits: torch.Tensor):
    scheduler = Scheduler(FakeRunner(whole_prompts=True), max_batch_size=len(seqs))
    for seq in seqs:
        scheduler.add(seq)
    batch = scheduler.schedule()
    deltas = scheduler.update(batch, lambda seqs, rows: Sampler(_Tokenizer(), V).sample(seqs, logits[rows]))
    return {d.request_id: d for d in deltas}


@pytest.mark.parametrize("fail_in", ["fill_bitmask", "accept"])
def test_a_row_whose_grammar_raises_ends_alone(fail_in):
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(0))
    alone = _step([_seq("greedy", temperature=0.0), _seq("seeded", seed=7)], logits)
    hostile = _seq("hostile", _Matcher(fail_in))
    deltas = _step([_seq("greedy", temperature=0.0), _seq("seeded", seed=7), hostile], logits)
    assert deltas["hostile"].status == RequestStatus.FINISHED_ERROR and deltas["hostile"].finish_reason == "error"
    assert "matcher exploded" in deltas["hostile"].error and not deltas["hostile"].token_ids
    assert not deltas["hostile"].error_is_request           # the grammar library broke: the engine's fault
    for name in ("greedy", "seeded"):          # the others go on, with the tokens they draw without it
        assert deltas[name].status == RequestStatus.RUNNING and deltas[name].error is None
        assert deltas[name].token_ids == alone[name].token_ids


def test_a_row_whose_probabilities_are_nan_ends_alone():
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(0))
    logits[1] = float("nan")                   # what a temperature of 1e-300 used to give
    deltas = _step([_seq("normal", seed=3), _seq("hostile", seed=3)], logits)
    assert deltas["hostile"].finish_reason == "error" and "sampling failed" in deltas["hostile"].error
    assert deltas["normal"].status == RequestStatus.RUNNING and len(deltas["normal"].token_ids) == 1


@pytest.mark.parametrize("dead_end, params", [("mask", {"seed": 7}), ("mask", {"temperature": 0.0}),
                                              ("refuse", {"seed": 7})])
def test_a_grammar_at_a_dead_end_is_the_requests_fault(dead_end, params):
    """A grammar that no token continues ends its row as the request's error (the faces' 400 where no answer
    has started), not the engine's; the row beside it goes on."""
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(0))
    deltas = _step([_seq("normal", seed=3), _seq("stuck", _Matcher(dead_end), **params)], logits)
    assert deltas["stuck"].finish_reason == "error" and deltas["stuck"].error_is_request
    assert "grammar" in deltas["stuck"].error and not deltas["stuck"].token_ids
    assert deltas["normal"].status == RequestStatus.RUNNING and not deltas["normal"].error_is_request

"""Constrained decoding makes even a random-weights model emit valid JSON, on every bounded schema."""
from __future__ import annotations

import asyncio
import json

import jsonschema
import openai

from tests.grammars.schemas import BOUNDED, BOUNDED_MAX_TOKENS


async def test_random_weights_model_emits_valid_json_for_every_bounded_schema(tiny_server):
    client = openai.AsyncOpenAI(base_url=tiny_server.v1, api_key="none", max_retries=0, timeout=600)

    async def one(case, seed: int):
        r = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": case.name}], max_tokens=BOUNDED_MAX_TOKENS,
            temperature=1.0, seed=seed, n=2,
            response_format={"type": "json_schema", "json_schema": {"name": case.name, "schema": case.schema}})
        return r

    results = await asyncio.gather(*[one(case, i) for i, case in enumerate(BOUNDED)])
    for case, r in zip(BOUNDED, results, strict=True):
        for choice in r.choices:
            assert choice.finish_reason == "stop", (case.name, choice.message.content)
            jsonschema.validate(json.loads(choice.message.content), case.schema)

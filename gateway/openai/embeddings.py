"""POST /v1/embeddings: each input's vector as floats or base64 (little-endian float32, as OpenAI sends)."""
from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from conch.engine.embedding import embed
from conch.gateway.openai.choices import new_id
from conch.gateway.openai.schemas.embeddings import EmbeddingRequest
from conch.gateway.state import conch_state
from conch.gateway.streaming import until_disconnect

router = APIRouter()


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


@router.post("/v1/embeddings")
async def create_embeddings(body: EmbeddingRequest, request: Request) -> JSONResponse:
    engine = conch_state(request).engine
    result = await until_disconnect(request, embed(engine, body.to_engine(new_id("embd"))))
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
            for i, v in enumerate(result.vectors)]
    usage = {"prompt_tokens": result.prompt_tokens, "total_tokens": result.prompt_tokens}
    return JSONResponse({"object": "list", "data": data, "model": body.model, "usage": usage})

"""GET /v1/models and /v1/models/{id}."""
from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.state import conch_state

router = APIRouter()

_CREATED = 1735689600  # fixed: a model's creation time is not the server's start time


def _card(model) -> dict:
    return {"id": model.name, "object": "model", "created": _CREATED, "owned_by": "conch",
            "max_model_len": model.context_length}


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    return {"object": "list", "data": [_card(m) for m in conch_state(request).engine.models()]}


@router.get("/v1/models/{model_id:path}")
async def get_model(model_id: str, request: Request) -> dict:
    return _card(conch_state(request).engine.get(model_id))

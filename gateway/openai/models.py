"""GET /v1/models and /v1/models/{id}: only the models the request's API key may use (the guard, which reads
the `model` path parameter, answers 404 for the others, as for a model that does not exist)."""
from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.auth import may_use
from gateway.state import conch_state

router = APIRouter()

_CREATED = 1735689600  # fixed: a model's creation time is not the server's start time


def _card(model) -> dict:
    return {"id": model.name, "object": "model", "created": _CREATED, "owned_by": "conch",
            "max_model_len": model.context_length}


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    models = [m for m in conch_state(request).engine.models() if may_use(m.name)]
    return {"object": "list", "data": [_card(m) for m in models]}


@router.get("/v1/models/{model:path}")
async def get_model(model: str, request: Request) -> dict:
    return _card(conch_state(request).engine.get(model))

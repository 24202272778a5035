"""GET /v1/models and /v1/models/{id}: only the models /v1 can serve (those that generate text from a prompt; not
tensor-only or python models) and the request's API key may use (the guard, which reads the `model` path
parameter, answers 404 for the others, as for a model that does not exist)."""
from __future__ import annotations

from fastapi import APIRouter, Request

from conch.engine.errors import EngineError, ModelNotFound
from conch.gateway.auth import may_use
from conch.gateway.json_route import JSONBodyRoute
from conch.gateway.state import conch_state

router = APIRouter(route_class=JSONBodyRoute)

_CREATED = 1735689600  # fixed: a model's creation time is not the server's start time


def _card(model) -> dict:
    """OpenAI's model object, with vLLM's max_model_len and the /v1 endpoints the model serves (the playground
    lists the models that chat)."""
    embeds = model.backend.capabilities.embeddings
    return {"id": model.name, "object": "model", "created": _CREATED, "owned_by": "conch",
            "max_model_len": model.context_length,
            "endpoints": ["embeddings"] if embeds else ["chat.completions", "completions"]}


def _serves_text(model) -> bool:
    try:
        return model.backend.tokenizer is not None
    except EngineError:             # an ensemble without a text path, or whose LLM step is not loaded
        return False


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    models = [m for m in conch_state(request).engine.models() if may_use(m.name) and _serves_text(m)]
    return {"object": "list", "data": [_card(m) for m in models]}


@router.get("/v1/models/{model:path}")
async def get_model(model: str, request: Request) -> dict:
    loaded = conch_state(request).engine.get(model)
    if not _serves_text(loaded):
        raise ModelNotFound(f"The model '{model}' does not exist on /v1 (it does not generate text from a "
                            "prompt; use /v2)", param="model")
    return _card(loaded)

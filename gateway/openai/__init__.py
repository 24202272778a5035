"""The OpenAI face: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /v1/conversations,
/v1/responses (their routes read every body as JSON, gateway/json_route.py); `socket_router`: WebSocket mode on
/v1/responses, which checks its own key (the guard dependency reads HTTP requests)."""
from fastapi import APIRouter

from conch.gateway.openai import chat, completions, conversations, embeddings, models, responses
from conch.gateway.openai.responses.socket import router as socket_router

router = APIRouter()
for _module in (chat, completions, conversations, embeddings, models, responses):
    router.include_router(_module.router)

__all__ = ["router", "socket_router"]

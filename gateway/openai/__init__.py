"""The OpenAI face: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models, /v1/conversations,
/v1/responses (their routes read every body as JSON, gateway/json_route.py)."""
from fastapi import APIRouter

from conch.gateway.openai import chat, completions, conversations, embeddings, models, responses

router = APIRouter()
for _module in (chat, completions, conversations, embeddings, models, responses):
    router.include_router(_module.router)

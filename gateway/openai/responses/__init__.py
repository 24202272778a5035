"""The Responses API face (/v1/responses), over the shared conversation path (gateway/conversation)."""
from conch.gateway.openai.responses.route import router

__all__ = ["router"]

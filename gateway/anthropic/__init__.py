"""The Anthropic face: /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API over the shared
conversation path), with Anthropic's error shape for every error under /v1/messages (errors.py registers it)."""
from conch.gateway.anthropic import errors as _errors  # noqa: F401 -- registers the error face at import
from conch.gateway.anthropic.route import router

__all__ = ["router"]

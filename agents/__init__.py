"""Chat -> prompt and model text -> messages: chat templates, tools, tool-call parsing, agent loops."""
from conch.agents.chat_template import ChatTemplateError, render_chat

__all__ = ["ChatTemplateError", "render_chat"]

"""The `openai` backend: a remote OpenAI-compatible server (or several deployments of one) as a model."""

"""Pydantic wire models of the OpenAI API, one module per endpoint."""

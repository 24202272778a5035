"""An LLM model's pipeline: tokenize -> generate -> detokenize, the built-in ensemble every LLM runs.

`tokenize` turns the prompt into ids checked against the context (once, before the response cache and the
queue); the backend's `generate` streams token ids; `detokenize` streams them back as text with stop strings.
Each step consumes the previous one's stream as it is produced, so the pipeline streams end to end."""
from conch.engine.pipeline.detokenize import detokenize
from conch.engine.pipeline.tokenize import tokenize

__all__ = ["detokenize", "tokenize"]

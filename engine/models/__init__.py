"""Models Conch can build or convert locally (no hub downloads at run time)."""
from engine.models.smollm2 import DEFAULT_MODEL_ID, ensure_smollm2
from engine.models.tiny import ensure_tiny_model

__all__ = ["DEFAULT_MODEL_ID", "ensure_smollm2", "ensure_tiny_model"]

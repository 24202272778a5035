"""Model weights: the built-in ones Conch builds or converts locally (no hub downloads at run time), and the
folder a config names (folder.py's `weights_folder`, imported from there: it reads the repository's config)."""
from conch.engine.weights.smollm2 import DEFAULT_MODEL_ID, ensure_smollm2
from conch.engine.weights.tiny import ensure_tiny_model

__all__ = ["DEFAULT_MODEL_ID", "ensure_smollm2", "ensure_tiny_model"]

"""The model repository: a folder per model with its config and version folders."""
from engine.repository.config import ModelConfig
from engine.repository.repository import ModelRepository

__all__ = ["ModelConfig", "ModelRepository"]

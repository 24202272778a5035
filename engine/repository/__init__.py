"""The model repository: a folder per model with its config and version folders (model control, which drives
the engine, is engine/model_control.py)."""
from conch.engine.repository.config import ModelConfig
from conch.engine.repository.repository import ModelRepository

__all__ = ["ModelConfig", "ModelRepository"]

"""The model repository: a folder per model with its config and version folders, and model control."""
from engine.repository.config import ModelConfig
from engine.repository.control import ControlMode, ModelControl
from engine.repository.repository import ModelRepository

__all__ = ["ControlMode", "ModelConfig", "ModelControl", "ModelRepository"]

"""Reads a model repository laid out as Triton's: <repo>/<model>/config.yaml and version folders."""
from __future__ import annotations

from pathlib import Path

from engine.errors import InvalidRequest
from engine.models.smollm2 import DEFAULT_MODEL_ID
from engine.repository.config import ModelConfig


def latest_version(model_dir: Path) -> str:
    versions = sorted((int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()))
    return str(versions[-1]) if versions else "1"


class ModelRepository:
    """A folder of models, or (with no folder) the built-in repository holding the default model."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root

    def names(self) -> list[str]:
        if self.root is None:
            return [DEFAULT_MODEL_ID]
        return sorted(p.name for p in self.root.iterdir() if (p / "config.yaml").exists())

    def config(self, name: str) -> ModelConfig:
        if self.root is None:
            if name != DEFAULT_MODEL_ID:
                raise InvalidRequest(f"model '{name}' is not in the built-in repository")
            return ModelConfig(name=DEFAULT_MODEL_ID, weights="builtin:smollm2")
        model_dir = self.root / name
        cfg = model_dir / "config.yaml"
        if not cfg.exists():
            raise InvalidRequest(f"model '{name}' has no config.yaml in {self.root}")
        return ModelConfig.from_yaml(cfg, name, path=str(model_dir), version=latest_version(model_dir))

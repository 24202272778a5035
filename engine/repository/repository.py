"""Reads a model repository laid out as Triton's: <repo>/<model>/config.yaml|config.pbtxt and version folders."""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Union

from conch.engine.errors import InvalidRequest, ModelNotFound
from conch.engine.weights.minilm import EMBEDDING_MODEL_ID, minilm_available
from conch.engine.weights.smollm2 import DEFAULT_MODEL_ID
from conch.engine.repository.batching import DynamicBatching
from conch.engine.repository.config import ModelConfig, confine_override
from conch.engine.repository.config_rules import OVERRIDE
from conch.engine.params.json_text import loads
from conch.engine.repository.object_store import ObjectStoreMirror, is_remote
from conch.engine.repository.pbtxt import from_json, parse_pbtxt, to_conch

CONFIG_FILES = ("config.yaml", "config.pbtxt")
RepositoryRoots = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], None]   # a folder/URL, several, none


def builtin_configs() -> dict[str, ModelConfig]:
    """The built-in repository: the default chat model and, when its package is installed, the default
    embedding model behind the dynamic batcher."""
    configs = {DEFAULT_MODEL_ID: ModelConfig(name=DEFAULT_MODEL_ID, weights="builtin:smollm2")}
    if minilm_available():
        configs[EMBEDDING_MODEL_ID] = ModelConfig(
            name=EMBEDDING_MODEL_ID, backend="embedding", weights="builtin:minilm", dtype="float32",
            max_batch_size=32, dynamic_batching=DynamicBatching(), response_cache=False)
    return configs


def disk_versions(model_dir: Path) -> list[int]:
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit())


def latest_version(model_dir: Path) -> str:
    versions = disk_versions(model_dir)
    return str(versions[-1]) if versions else "1"


class ModelRepository:
    """One or more model folders (Triton's repeated --model-repository: local paths or object storage,
    engine/repository/object_store.py), or, with none, fixed configs: the models named on the command line
    (paths.py), else the built-in repository holding the default model."""

    def __init__(self, root: RepositoryRoots = None, models: dict[str, ModelConfig] | None = None) -> None:
        roots = [] if root is None else [root] if isinstance(root, (str, os.PathLike)) else list(root)
        self.mirrors = [ObjectStoreMirror(str(r)) for r in roots if is_remote(r)]
        mirrored = iter(self.mirrors)
        self.roots = [next(mirrored).local if is_remote(r) else Path(r) for r in roots]
        self.labels = {folder: (str(r) if is_remote(r) else str(folder)) for folder, r in zip(self.roots, roots,
                                                                                         strict=True)}
        self.root = self.roots[0] if self.roots else None     # the first repository (a config override's)
        self._fixed = models or None
        self.refresh()

    def _fixed_configs(self) -> dict[str, ModelConfig]:
        return self._fixed if self._fixed is not None else builtin_configs()

    def refresh(self) -> None:
        """Bring the object-storage mirrors up to date with their buckets (a no-op for local folders)."""
        for mirror in self.mirrors:
            mirror.sync()

    def _holding(self, name: str) -> list[Path]:
        return [root for root in self.roots if any((root / name / f).exists() for f in CONFIG_FILES)]

    def model_dir(self, name: str) -> Path:
        """The model's folder; a name in two repositories is refused, as Triton refuses it."""
        holding = self._holding(name)
        if len(holding) > 1:
            raise InvalidRequest(f"model '{name}' is in more than one repository: "
                                 f"{', '.join(self.labels[r] for r in holding)}")
        if holding:
            return holding[0] / name
        for root in self.roots:
            if (root / name).is_dir():
                return root / name
        raise ModelNotFound(f"model '{name}' is not in the repository {self._label()}")

    def _label(self) -> str:
        return ", ".join(self.labels.values())

    def names(self) -> list[str]:
        if not self.roots:
            return list(self._fixed_configs())
        return sorted({p.name for root in self.roots for p in root.iterdir()
                       if any((p / f).exists() for f in CONFIG_FILES)})

    def config(self, name: str, version: str | None = None, override: Any = None) -> ModelConfig:
        """The config of `version` (default: the newest the version policy serves)."""
        if not self.roots:
            config = self._fixed_configs().get(name)
            if config is None:
                where = "on the command line" if self._fixed is not None else "in the built-in repository"
                raise ModelNotFound(f"model '{name}' is not {where}")
            return config
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise ModelNotFound(f"model '{name}' is not in the repository")
        model_dir = self.model_dir(name)
        config = self._read(name, model_dir, version or latest_version(model_dir), override)
        if version is None:
            served = self.versions(name, config)
            if served and served[-1] != config.version:
                config = self._read(name, model_dir, served[-1], override)
        return config

    def versions(self, name: str, config: ModelConfig | None = None) -> list[str]:
        """Versions on disk that the model's version policy serves, ascending."""
        if not self.roots:
            return ["1"]
        config = config or self.config(name)
        return [str(v) for v in config.version_policy.select(disk_versions(self.model_dir(name)))]

    def served_versions(self, name: str, config: ModelConfig) -> list[str]:
        """The versions to serve, ascending; a model without version folders serves its config's version."""
        return self.versions(name, config) or [config.version]

    def fingerprint(self, name: str, version: str | None = None) -> tuple:
        """Changes whenever the model's files change (what poll mode watches); with `version`, only when its
        config or that version's folder changes."""
        try:
            model_dir = self.model_dir(name) if self.roots else None
        except (ModelNotFound, InvalidRequest):
            return ()
        if model_dir is None or not model_dir.is_dir():
            return ()
        files = []
        for p in model_dir.rglob("*"):
            rel = p.relative_to(model_dir)
            if "__pycache__" in rel.parts or (version is not None and rel.parts[0].isdigit()
                                                and rel.parts[0] != version):
                continue
            files.append((str(rel), p.stat().st_mtime_ns))
        return tuple(sorted(files))

    def _read(self, name: str, model_dir: Path, version: str, override: Any) -> ModelConfig:
        extra = {"path": str(model_dir), "version": version}
        if override is not None:
            return confine_override(_from_override(name, override, **extra), model_dir.parent)   # the root
        yaml_file, pbtxt_file = (model_dir / f for f in CONFIG_FILES)
        if yaml_file.exists():
            return ModelConfig.from_yaml(yaml_file, name, **extra)
        if pbtxt_file.exists():
            return to_conch(parse_pbtxt(pbtxt_file.read_text(), name), name, **extra)
        if model_dir.is_dir():
            raise InvalidRequest(f"model '{name}' has neither config.yaml nor config.pbtxt in "
                                 f"{self.labels[model_dir.parent]}")
        raise ModelNotFound(f"model '{name}' is not in the repository {self._label()}")


def _from_override(name: str, override: Any, **extra: Any) -> ModelConfig:
    """A config given on load: Conch's own keys, or Triton's ModelConfig as JSON."""
    try:
        data = loads(override) if isinstance(override, str) else override
    except ValueError as exc:
        raise InvalidRequest(f"model '{name}': the config override is not JSON: {exc}", param="config") from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"model '{name}': the config override is not a JSON object", param="config")
    if set(data) <= {f.name for f in fields(ModelConfig)}:
        return ModelConfig.from_mapping(name, {k: v for k, v in data.items() if k != "name"}, OVERRIDE, **extra)
    return to_conch(from_json(data, name), name, **extra)

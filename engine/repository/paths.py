"""`conch serve PATH` / `--model NAME=PATH`: a model served straight from a .gguf file or an HF folder, with no
repository folder or config file. Its config names the path as its weights and takes the model's own context
length (the GGUF's {arch}.context_length, the folder's max_position_embeddings); its chat template, tokenizer
and generation defaults are read from the same files at load (engine/backends/conch/loader.py). `--mmproj
[NAME=]PATH` gives a GGUF model its llama.cpp mmproj file (its vision tower; PATH alone: the one model named)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conch.engine.errors import InvalidRequest
from conch.engine.repository.config import ModelConfig
from conch.engine.weights.model_files import context_length, is_gguf


def model_name(path: Path) -> str:
    """A file's name without .gguf (`Llama-3.2-1B-Instruct-Q8_0`), a folder's own name."""
    return path.name[:-len(".gguf")] if is_gguf(path) else path.name


def path_config(name: str, path: Path) -> ModelConfig:
    """The config serving `path`; InvalidRequest naming it when it is neither a .gguf file nor a model folder."""
    path = path.expanduser().resolve()
    if is_gguf(path) and not path.is_file():
        raise InvalidRequest(f"model '{name}': no GGUF file at {path}", param="model")
    if not is_gguf(path) and not (path / "config.json").is_file():
        raise InvalidRequest(f"model '{name}': {path} is neither a .gguf file nor a folder holding config.json",
                             param="model")
    length = context_length(path)
    config = ModelConfig(name=name, weights=str(path))
    return replace(config, context_length=length) if length else config


def path_configs(positional: list[Path], named: list[str], mmproj: tuple[str, ...] = ()) -> dict[str, ModelConfig]:
    """PATH arguments (served under the file's or folder's name) and NAME=PATH ones, in order, with their
    mmproj files; a name given twice is refused."""
    pairs = [(model_name(p), p) for p in positional]
    for spec in named:
        name, sep, where = spec.partition("=")
        if not sep or not name or not where:
            raise InvalidRequest(f"--model {spec!r}: expected NAME=PATH", param="model")
        pairs.append((name, Path(where)))
    configs: dict[str, ModelConfig] = {}
    for name, path in pairs:
        if name in configs:
            raise InvalidRequest(f"model name '{name}' is given twice; name one with --model NAME=PATH", param="model")
        configs[name] = path_config(name, path)
    return _with_mmproj(configs, mmproj)


def _with_mmproj(configs: dict[str, ModelConfig], specs: tuple[str, ...]) -> dict[str, ModelConfig]:
    for spec in specs:
        name, sep, where = spec.partition("=") if "=" in spec else ("", "", spec)
        if not sep:
            if len(configs) != 1:
                raise InvalidRequest(f"--mmproj {spec!r}: name the model (NAME=PATH) when serving several",
                                     param="mmproj")
            name = next(iter(configs))
        if name not in configs or not is_gguf(Path(configs[name].weights or "")):
            raise InvalidRequest(f"--mmproj {spec!r}: '{name}' is not a .gguf model served here", param="mmproj")
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise InvalidRequest(f"--mmproj {spec!r}: no file at {path}", param="mmproj")
        configs[name] = replace(configs[name], mmproj=str(path))
    return configs

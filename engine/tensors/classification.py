"""Triton's classification extension: an output asked for with `classification: N` (gRPC `class_count`) comes
back as its N highest values per batch row, each the string "value:index" or, when the output's config names a
`label_filename` (one label per line, in the model's folder), "value:index:label". A batching model's output
keeps its batch dimension: [batch, N]; any other output is flattened: [N]."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from conch.engine.errors import InvalidRequest
from conch.engine.loaded_model import LoadedModel
from conch.engine.tensors.contract import batches
from conch.engine.tensors.interface import Tensors


def classified(model: LoadedModel, outputs: Tensors, counts: dict[str, int]) -> Tensors:
    """The outputs with each one named in `counts` replaced by its top classes."""
    if not counts:
        return outputs
    return {name: classify(model, name, array, counts[name], batches(model.config)) if name in counts else array
            for name, array in outputs.items()}


def classify(model: LoadedModel, name: str, array: np.ndarray, count: int, batched: bool) -> np.ndarray:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidRequest(f"output '{name}': classification must be a positive integer", param=name)
    if array.dtype == np.object_ or array.dtype.kind not in "biuf":
        raise InvalidRequest(f"output '{name}' is not numeric and cannot be classified", param=name)
    labels = _labels(model, name)
    rows = array.reshape(array.shape[0], -1) if batched and array.ndim > 1 else array.reshape(1, -1)
    out = [[_entry(row, i, labels) for i in np.argsort(-row, kind="stable")[:count]] for row in rows]
    result = np.array(out, dtype=np.object_)
    return result if batched and array.ndim > 1 else result.reshape(-1)


def _entry(row: np.ndarray, index: int, labels: list[str]) -> bytes:
    value = row[index].item()
    text = f"{value:f}:{index}" if isinstance(value, float) else f"{value}:{index}"
    return (f"{text}:{labels[index]}" if index < len(labels) else text).encode()


def _labels(model: LoadedModel, name: str) -> list[str]:
    message, folder = model.config.triton, model.config.path
    if message is None or folder is None:
        return []
    filename = next((o.label_filename for o in message.output if o.name == name), "")
    path = Path(folder) / filename if filename else None
    if path is None or not path.is_file():
        return []
    return list(_read_labels(str(path), path.stat().st_mtime_ns))


@lru_cache(maxsize=64)
def _read_labels(path: str, mtime_ns: int) -> tuple[str, ...]:
    """A label file, read once per version of it (requests do not reread it)."""
    return tuple(Path(path).read_text().splitlines())

"""A sentence encoder as sentence-transformers builds one: transformer -> pooling over the attention mask ->
L2 normalize. Reads a sentence-transformers folder (1_Pooling/config.json, sentence_bert_config.json,
modules.json) or a plain transformers folder (mean pooling, normalized).

`encode` is synchronous and holds no state between calls: the dynamic batcher runs it in a worker thread.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from conch.engine.weights.folder import weights_folder
from conch.engine.errors import BackendUnavailable
from conch.engine.repository.config import ModelConfig

_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
POOLINGS = ("mean", "cls")


@dataclass(frozen=True)
class EncoderSpec:
    """What the folder says about pooling and length."""

    pooling: str = "mean"
    normalize: bool = True
    max_length: int = 512

    @classmethod
    def read(cls, folder: Path, config: ModelConfig, model_max: int) -> "EncoderSpec":
        pooling = str(config.parameters.get("pooling", "")) or _folder_pooling(folder)
        if pooling not in POOLINGS:
            raise BackendUnavailable(f"model '{config.name}': pooling must be one of {POOLINGS}, got {pooling!r}")
        st = _json(folder / "sentence_bert_config.json")
        max_length = min(int(st.get("max_seq_length", model_max)), model_max, config.context_length)
        normalize = _json_list(folder / "modules.json", "sentence_transformers.models.Normalize")
        normalize = str(config.parameters.get("normalize", normalize)).lower() in ("true", "1")
        return cls(pooling, normalize, max_length)


class Encoder:
    def __init__(self, config: ModelConfig) -> None:
        from transformers import AutoModel, AutoTokenizer

        if config.dtype not in _DTYPES:
            raise BackendUnavailable(f"model '{config.name}': dtype must be one of {sorted(_DTYPES)}")
        torch.set_num_threads(config.num_threads or os.cpu_count() or 1)
        folder = Path(weights_folder(config))
        self.tokenizer = AutoTokenizer.from_pretrained(config.resolve(config.tokenizer) or folder)
        self.model = AutoModel.from_pretrained(folder, dtype=_DTYPES[config.dtype]).eval()
        model_max = int(getattr(self.model.config, "max_position_embeddings", 512))
        self.spec = EncoderSpec.read(folder, config, model_max)
        self.dimension = int(self.model.config.hidden_size)
        self.pad_id = self.tokenizer.pad_token_id or 0

    @torch.inference_mode()
    def encode(self, rows: list[tuple[int, ...]]) -> np.ndarray:
        """Token id rows (special tokens included) -> (len(rows), dimension) float32 embeddings."""
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)          # (B, T)
        mask = torch.zeros((len(rows), width), dtype=torch.long)                     # (B, T)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, :len(row)] = 1
        hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state.float()   # (B, T, H)
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)                            # (B, T, 1)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)      # (B, H)
        if self.spec.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.numpy()


def _folder_pooling(folder: Path) -> str:
    pooling = _json(folder / "1_Pooling" / "config.json")
    return "cls" if pooling.get("pooling_mode_cls_token") else "mean"


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _json_list(path: Path, module_type: str) -> bool:
    """True when modules.json lists `module_type`; a folder without modules.json is normalized."""
    if not path.exists():
        return True
    return any(m.get("type") == module_type for m in json.loads(path.read_text()))

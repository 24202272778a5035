"""A locally built vision-language model saved as the hub's checkpoints name its tensors: transformers 5 saves
a CLIP or SigLIP tower without its `vision_model.` level (`vision_tower.encoder...`), which it reads either
way, but vLLM's model loaders and llama.cpp's converter read only the hub's `vision_tower.vision_model....`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

TOWER = "vision_tower."


class HubLayout:
    """`model` whose save_pretrained writes the hub's tensor names (publish() saves through it)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def save_pretrained(self, folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        self.model.save_pretrained(folder)
        for path in Path(folder).glob("*.safetensors"):
            state = load_file(path)
            renamed = {f"{TOWER}vision_model.{k.removeprefix(TOWER)}" if k.startswith(TOWER) and
                       not k.startswith(f"{TOWER}vision_model.") else k: v for k, v in state.items()}
            save_file(renamed, path, metadata={"format": "pt"})

"""Prints docs/backends.md's capability table from the registry and each backend class's Capabilities:
`.venv/bin/python scripts/backend_table.py`. A backend whose flags depend on the model (openai: its
upstream; ensemble: its LLM step) or whose module does not import here says so instead of a row of flags."""
from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conch.engine.backend import Capabilities, TensorModel, TextGenerator, backend_names, load_backend_class  # noqa: E402
from conch.engine.errors import BackendUnavailable  # noqa: E402

FLAGS = [f.name for f in fields(Capabilities) if f.type in ("bool", bool)]


def _roles(cls: type) -> str:
    roles = [name for name, proto in (("TextGenerator", TextGenerator), ("TensorModel", TensorModel))
             if all(hasattr(cls, member) for member in _members(proto))]
    return ", ".join(roles) or "-"


def _members(proto: type) -> list[str]:
    return [m for m in ("generate", "abort", "infer") if m in proto.__dict__]


def row(name: str) -> str:
    try:
        cls = load_backend_class(name)
    except BackendUnavailable as exc:
        return f"| `{name}` | (module not importable here: {exc}) |" + " |" * len(FLAGS)
    caps = getattr(cls, "capabilities", None)
    if not isinstance(caps, Capabilities):
        return f"| `{name}` | {_roles(cls)} | " + " | ".join("per model" for _ in FLAGS) + " |"
    return f"| `{name}` | {_roles(cls)} | " + " | ".join("yes" if getattr(caps, f) else "" for f in FLAGS) + " |"


def main() -> None:
    print("| backend | roles | " + " | ".join(FLAGS) + " |")
    print("|---|---|" + "---|" * len(FLAGS))
    for name in backend_names():
        print(row(name))


if __name__ == "__main__":
    main()

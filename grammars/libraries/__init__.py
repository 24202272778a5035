"""The grammar libraries by name, each imported only when first asked for.

A library is a module here plus its third-party package; one whose package is missing is simply
not available (`available_libraries()`), and asking for it explains how to install it.
"""

from __future__ import annotations

import importlib

from .base import Library

DEFAULT_LIBRARY = "llguidance"

# name -> (adapter module, adapter class, pip extra that installs it)
_REGISTRY: dict[str, tuple[str, str, str]] = {
    "llguidance": ("conch.grammars.libraries.llguidance", "LLGuidanceLibrary", "conch"),
    "xgrammar": ("conch.grammars.libraries.xgrammar", "XGrammarLibrary", "conch[xgrammar]"),
    "outlines": ("conch.grammars.libraries.outlines", "OutlinesLibrary", "conch"),
}


def library_names() -> tuple[str, ...]:
    """Every library Conch knows, installed or not."""
    return tuple(_REGISTRY)


def library_class(name: str) -> type[Library]:
    """The adapter class for `name`; ValueError if unknown, ImportError if not installed."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown grammar library {name!r}; known: {', '.join(_REGISTRY)}")
    module_name, class_name, extra = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"grammar library {name!r} is not installed ({exc}); pip install '{extra}'") from exc
    return getattr(module, class_name)


def available_libraries() -> tuple[str, ...]:
    """The libraries whose packages import here, default first."""
    found = []
    for name in _REGISTRY:
        try:
            library_class(name)
        except ImportError:
            continue
        found.append(name)
    return tuple(found)


__all__ = ["DEFAULT_LIBRARY", "Library", "available_libraries", "library_class", "library_names"]

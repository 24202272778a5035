"""grammars/libraries/: the registry by name, imported lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conch.grammars import available_libraries
from conch.grammars.libraries import DEFAULT_LIBRARY, library_class, library_names


def test_registry_knows_three_and_the_default_is_installed():
    assert library_names() == ("llguidance", "xgrammar", "outlines")
    assert available_libraries()[0] == DEFAULT_LIBRARY == "llguidance"
    assert "outlines" in available_libraries()  # outlines-core is a core dependency


def test_library_class_by_name():
    for name in available_libraries():
        assert library_class(name).name == name
    with pytest.raises(ValueError):
        library_class("guidance")


def test_importing_grammars_imports_no_library():
    names = "('llguidance', 'xgrammar', 'outlines_core')"
    code = f"import sys, grammars; print(sorted(m for m in {names} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""The four layers are top-level folders that install as one namespace: gateway/ -> conch.gateway, and so on.

pyproject.toml holds everything else; only this mapping needs code (setuptools' package discovery cannot add
a prefix). Nothing named `gateway`, `engine`, `agents` or `grammars` lands in site-packages."""
from setuptools import find_packages, setup

LAYERS = ("gateway", "engine", "agents", "grammars")

setup(
    package_dir={f"conch.{layer}": layer for layer in LAYERS},
    packages=[f"conch.{layer}{'.' + sub if sub else ''}"
              for layer in LAYERS for sub in ("", *find_packages(layer))],
)

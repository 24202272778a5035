"""Conch on Ray Serve: the ingress wraps the FastAPI app, each model is a deployment holding an Engine.

Imported only by `conch serve --ray` and `serve run gateway.ray.app:build`; needs the `[ray]` extra."""
from conch.gateway.ray.app import application, build
from conch.gateway.ray.settings import RaySettings

__all__ = ["RaySettings", "application", "build"]

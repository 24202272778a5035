"""Backends, each in its own subpackage, found through engine.backend's registry."""

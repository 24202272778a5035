"""The `python` backend: a user's model.py, as Triton's Python backend runs it."""

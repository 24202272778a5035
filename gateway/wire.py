"""The base of every face's pydantic wire schemas (OpenAI's, Anthropic's)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """Unknown fields are rejected with a 400 that names them, never silently ignored; so is a float that is NaN
    or infinite (also when sent as a string, "nan")."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

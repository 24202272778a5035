"""An API key as the gateway holds it: its secret (never logged), its name, the models it may use, its limits
and roles. gateway/keys_file.py reads a keys file into these; gateway/auth.py checks requests against them."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

ROLES = ("admin", "metrics")      # an admin key holds every role

@dataclass(frozen=True)
class ApiKey:
    secret: str = field(repr=False)
    name: str = ""
    models: frozenset[str] | None = None     # None: every model
    rpm: int | None = None
    tpm: int | None = None
    admin: bool = False
    metrics: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", "key-" + hashlib.sha256(self.secret.encode()).hexdigest()[:12])

    def allows(self, model: str) -> bool:
        return self.models is None or model in self.models

    def has(self, role: str) -> bool:
        return self.admin or (role == "metrics" and self.metrics)

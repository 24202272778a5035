"""Opaque blobs only this deployment can read back: a value sealed (encrypted and authenticated, Fernet:
AES-128-CBC + HMAC-SHA256) into a string a client carries between stateless turns, such as a Responses
`compaction` item's `encrypted_content`.

The key comes from CONCH_SEAL_KEY (any string; its SHA-256 is the key), so every replica of a deployment (and a
restarted server) reads the others' blobs; without it a key is drawn per process, and a blob outlives neither
the process nor a move to another replica. A blob that was not sealed with this key, or was altered, is
refused (`Unsealable`)."""
from __future__ import annotations

import base64
import hashlib
import json
import os
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

KEY_ENV = "CONCH_SEAL_KEY"


class Unsealable(ValueError):
    """The blob was not sealed by this deployment, or was altered."""


@lru_cache(maxsize=1)
def _fernet() -> Fernet:
    secret = os.environ.get(KEY_ENV)
    key = base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()) if secret else Fernet.generate_key()
    return Fernet(key)


def seal(kind: str, value: Any) -> str:
    """`value` (JSON-able) sealed under `kind`: a blob of one kind never opens as another."""
    return _fernet().encrypt(json.dumps({"kind": kind, "value": value}).encode()).decode()


def unseal(kind: str, blob: str) -> Any:
    try:
        payload = json.loads(_fernet().decrypt(blob.encode()))
    except (InvalidToken, ValueError, TypeError) as exc:
        raise Unsealable(f"not a {kind} this deployment sealed") from exc
    if not isinstance(payload, dict) or payload.get("kind") != kind:
        raise Unsealable(f"not a {kind} this deployment sealed")
    return payload["value"]

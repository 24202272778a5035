"""Reasoning carried between stateless turns as an opaque blob only this deployment reads back: Responses'
`encrypted_content`, Messages' thinking `signature` and `redacted_thinking.data`. Sealed by gateway/sealed.py
(one key for every opaque blob, CONCH_SEAL_KEY) under the kind "reasoning", so a compaction blob never opens as
reasoning, nor the other way round."""
from __future__ import annotations

from conch.gateway.sealed import Unsealable, seal as seal_value, unseal as unseal_value

KIND = "reasoning"
SealError = Unsealable


def seal(text: str) -> str:
    return seal_value(KIND, text)


def unseal(blob: str) -> str:
    value = unseal_value(KIND, blob)
    if not isinstance(value, str):
        raise Unsealable("not reasoning this deployment sealed")
    return value

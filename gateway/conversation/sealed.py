"""Reasoning carried between stateless turns as an opaque blob only this deployment reads back: Responses'
`encrypted_content`, Messages' thinking `signature` and `redacted_thinking.data`.

A blob is urlsafe base64 of nonce (12 bytes) + AES-256-GCM ciphertext of the UTF-8 text, with a fixed
associated label, so it is secret and integrity-protected: a changed byte or another key fails to open. The
key is CONCH_REASONING_KEY (32 bytes as 64 hex digits or urlsafe base64); without it each server process draws
its own, so blobs open only on the process that wrote them (set the key for replicas and restarts).
"""
from __future__ import annotations

import base64
import binascii
import functools
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_ENV = "CONCH_REASONING_KEY"
_LABEL = b"conch-reasoning-v1"
_NONCE = 12


class SealError(ValueError):
    """A blob this deployment did not write (or that was changed)."""


@functools.cache
def _cipher() -> AESGCM:
    return AESGCM(_key(os.environ.get(KEY_ENV)))


def _key(value: str | None) -> bytes:
    if not value:
        return secrets.token_bytes(32)
    try:
        key = bytes.fromhex(value) if len(value) == 64 else base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (ValueError, binascii.Error):
        key = b""
    if len(key) != 32:
        raise ValueError(f"{KEY_ENV} must be 32 bytes, as 64 hex digits or urlsafe base64")
    return key


def seal(text: str) -> str:
    nonce = secrets.token_bytes(_NONCE)
    return base64.urlsafe_b64encode(nonce + _cipher().encrypt(nonce, text.encode(), _LABEL)).decode().rstrip("=")


def unseal(blob: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
        return _cipher().decrypt(raw[:_NONCE], raw[_NONCE:], _LABEL).decode()
    except (ValueError, binascii.Error, InvalidTag, UnicodeDecodeError):
        raise SealError("this reasoning was not written by this deployment (or was changed)") from None

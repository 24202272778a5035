"""The keys file (`--api-keys-file`, YAML or JSON), validated once when it is read: at start and at each reload.

    keys:
      - {key: sk-team-a, name: team-a, models: [tiny], rpm: 60, tpm: 100000, admin: false, metrics: false}

Every entry is typed here (pydantic, strict: no string for a number, no number for a string): `key` a non-empty
string, `name` a non-empty string, `models` a list of model names, `rpm` / `tpm` positive integers, `admin` /
`metrics` booleans, no other field. Names and secrets are unique across the file and the command line's keys:
two entries of one name would share records and limits; a duplicate secret would make one entry win in silence.
A bad file is KeysFileError naming the entry (its index and name, never its secret) and the field.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from conch.gateway.api_key import ApiKey


class KeysFileError(ValueError):
    """A keys file that cannot be served: the message names the file, the entry and the field."""


class KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    key: StrictStr = Field(min_length=1)
    name: StrictStr | None = Field(None, min_length=1)
    models: list[StrictStr] | None = None
    rpm: StrictInt | None = Field(None, gt=0)
    tpm: StrictInt | None = Field(None, gt=0)
    admin: StrictBool = False
    metrics: StrictBool = False

    def api_key(self) -> ApiKey:
        return ApiKey(self.key, self.name or "", frozenset(self.models) if self.models is not None else None,
                      self.rpm, self.tpm, self.admin, self.metrics)


def read_keys_file(file: Path) -> list[ApiKey]:
    """The file's keys, in order; KeysFileError for a file that does not parse or an entry that is not valid."""
    try:
        text = Path(file).read_text()
        data = json.loads(text) if str(file).endswith(".json") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise KeysFileError(f"keys file {file}: cannot be read: {exc}") from None
    entries = data.get("keys", []) if isinstance(data, dict) else data
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise KeysFileError(f"keys file {file}: 'keys' must be a list of entries, got {type(entries).__name__}")
    return [_entry(file, index, entry) for index, entry in enumerate(entries)]


def _entry(file: Path, index: int, entry: Any) -> ApiKey:
    label = _label(index, entry)
    if not isinstance(entry, dict):
        raise KeysFileError(f"keys file {file}: {label} must be a mapping, got {type(entry).__name__}")
    try:
        return KeyEntry.model_validate(entry).api_key()
    except ValidationError as exc:
        problems = "; ".join(f"'{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors())
        raise KeysFileError(f"keys file {file}: {label}: {problems}") from None


def _label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"entry {index} (name '{name}')" if isinstance(name, str) else f"entry {index}"


def check_unique(keys: Sequence[ApiKey]) -> None:
    """KeysFileError when two keys share a name or a secret (naming both by name, never the secret)."""
    names: set[str] = set()
    secrets: dict[str, str] = {}
    for key in keys:
        if key.name in names:
            raise KeysFileError(f"keys: two entries are named '{key.name}'; names must be unique (a key's "
                                "records and limits go by its name)")
        if key.secret in secrets:
            raise KeysFileError(f"keys: the entries '{secrets[key.secret]}' and '{key.name}' share one secret; "
                                "secrets must be unique")
        names.add(key.name)
        secrets[key.secret] = key.name

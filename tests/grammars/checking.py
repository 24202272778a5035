"""Checking an output against its schema the strict way: parse, then jsonschema with formats.

jsonschema checks only the formats whose optional packages are installed; the rest are added
here with the standard library, so a format Conch claims to enforce is always checked. Formats
Conch does not enforce are annotations (as draft 2020-12 says by default) and are not checked.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from datetime import datetime, time
from typing import Any

import jsonschema

from conch.grammars.schema_keywords import FORMATS

FORMAT_CHECKER = jsonschema.FormatChecker(formats=sorted(FORMATS & set(jsonschema.FormatChecker.checkers)))

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DURATION = re.compile(
    r"^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$"
)
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_URI_CHARS = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*$")


def _leap_second_free(text: str) -> str:
    return re.sub(r"(\d{2}:\d{2}):60", r"\1:59", text)  # RFC 3339 allows a leap second


@FORMAT_CHECKER.checks("date-time")
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    text = _leap_second_free(value)
    return bool(_DATE_TIME.match(text)) and bool(datetime.fromisoformat(text.upper().replace("Z", "+00:00")))


@FORMAT_CHECKER.checks("time")
def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    text = _leap_second_free(value)
    return bool(_TIME.match(text)) and bool(time.fromisoformat(text.upper().replace("Z", "+00:00")))


@FORMAT_CHECKER.checks("duration")
def _is_duration(value: object) -> bool:
    return not isinstance(value, str) or bool(_DURATION.match(value))


@FORMAT_CHECKER.checks("hostname")
def _is_hostname(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return 0 < len(value.rstrip(".")) <= 253 and all(_LABEL.match(label) for label in value.rstrip(".").split("."))


@FORMAT_CHECKER.checks("uri")
def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or (bool(_URI_CHARS.match(value)) and bool(urllib.parse.urlparse(value).scheme))


def validate_output(schema: dict[str, Any], text: str) -> Any:
    """The parsed output; raises (json or jsonschema errors) unless it is valid under `schema`."""
    instance = json.loads(text)
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator(schema, format_checker=FORMAT_CHECKER).validate(instance)
    return instance


def parse_unique(text: str) -> Any:
    """`json.loads(text)`, failing if any object in it holds a key twice (json.loads would keep the last)."""
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), f"a key appears twice: {keys}"
        return dict(pairs)

    return json.loads(text, object_pairs_hook=unique_keys)

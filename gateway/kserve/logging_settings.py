"""Triton's logging extension: GET/POST /v2/logging (and gRPC LogSettings) read and change the server's log
settings at run time.

    log_info, log_warning, log_error (bool)   which severities are written (Conch's loggers and python models')
    log_verbose_level (uint)                  > 0 writes DEBUG records too
    log_format ("default" | "ISO8601")        the timestamp format of each line
    log_file ("")                             only "" (the server's stderr): a client that could name a file
                                              could write anywhere the server may, so another value is a 400

An unknown setting or a wrongly typed value is a 400 naming it. Changes need the `admin` role when API keys
are configured. The settings apply to the root logger, which every Conch logger and `pb_utils.Logger` reach.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import Any

from conch.engine.errors import InvalidRequest

_FORMATS = {"default": "%(asctime)s %(levelname)s %(name)s: %(message)s",
            "ISO8601": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
_DATEFMT = {"default": None, "ISO8601": "%Y-%m-%dT%H:%M:%S"}
_TYPES: dict[str, type[Any]] = {"log_file": str, "log_info": bool, "log_warning": bool, "log_error": bool,
                                "log_verbose_level": int, "log_format": str}


@dataclass(frozen=True)
class LogSettings:
    log_file: str = ""
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_verbose_level: int = 0
    log_format: str = "default"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def level(self) -> int:
        """The lowest severity written (a disabled severity below an enabled one is filtered separately)."""
        if self.log_verbose_level > 0:
            return logging.DEBUG
        for enabled, level in ((self.log_info, logging.INFO), (self.log_warning, logging.WARNING),
                               (self.log_error, logging.ERROR)):
            if enabled:
                return level
        return logging.CRITICAL


class _SeverityFilter(logging.Filter):
    def __init__(self, settings: LogSettings) -> None:
        super().__init__()
        self.off = {lvl for on, lvl in ((settings.log_info, logging.INFO), (settings.log_warning, logging.WARNING),
                                        (settings.log_error, logging.ERROR)) if not on}

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno not in self.off


class ServerLogging:
    """The settings in force; `update` validates a change, applies it and returns the new settings."""

    def __init__(self) -> None:
        self.settings = LogSettings()
        self._filter: _SeverityFilter | None = None

    def update(self, changes: dict[str, Any]) -> LogSettings:
        settings = replace(self.settings, **{k: _checked(k, v) for k, v in changes.items()})
        if settings.log_file:
            raise InvalidRequest("log_file cannot be set over the API (the server logs to its stderr); "
                                 "redirect the server's output instead", param="log_file")
        if settings.log_format not in _FORMATS:
            raise InvalidRequest(f"log_format must be one of {sorted(_FORMATS)}, got {settings.log_format!r}",
                                 param="log_format")
        self._apply(settings)
        self.settings = settings
        return settings

    def _apply(self, settings: LogSettings) -> None:
        root = logging.getLogger()
        root.setLevel(settings.level)
        formatter = logging.Formatter(_FORMATS[settings.log_format], _DATEFMT[settings.log_format])
        severity = _SeverityFilter(settings)
        for handler in root.handlers:
            handler.setFormatter(formatter)
            if self._filter is not None:
                handler.removeFilter(self._filter)
            handler.addFilter(severity)
        self._filter = severity


def _checked(key: str, value: Any) -> Any:
    kind = _TYPES.get(key)
    if kind is None:
        raise InvalidRequest(f"unknown log setting '{key}'; settings: {sorted(_TYPES)}", param=key)
    if kind is int and isinstance(value, str) and value.isdigit():
        value = int(value)                                    # Triton's clients send numbers as strings too
    if kind is bool and isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or value < 0)):
        wanted = "a non-negative integer" if kind is int else kind.__name__
        raise InvalidRequest(f"log setting '{key}' must be {wanted}", param=key)
    return value

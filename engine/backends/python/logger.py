"""pb_utils.Logger: a model's log lines go to the server's log (the logger `triton.python.<model>` is not
known here, so all python models share `triton.python`), at Triton's four levels."""
from __future__ import annotations

import enum
import logging

_log = logging.getLogger("triton.python")


class LogLevel(enum.IntEnum):
    INFO = logging.INFO
    WARNING = logging.WARNING
    ERROR = logging.ERROR
    VERBOSE = logging.DEBUG


class Logger:
    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        _log.log(int(level), "%s", message)

    @staticmethod
    def log_info(message: str) -> None:
        _log.info("%s", message)

    @staticmethod
    def log_warn(message: str) -> None:
        _log.warning("%s", message)

    @staticmethod
    def log_error(message: str) -> None:
        _log.error("%s", message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _log.debug("%s", message)

"""A bound on how long a connection may take to send a request's headers (slowloris).

uvicorn bounds the idle time between requests (`timeout_keep_alive`) but not the time a client spends
sending a request's head: 300 connections that send half their headers each held a connection for 120 s or
more. `header_timeout_protocol(seconds)` is uvicorn's httptools protocol with one timer: armed when the
connection opens and when each request's first byte arrives, cancelled when that request's headers are
complete, and on expiry the connection is closed (no response: a client that has not finished its headers
has not asked for one). Bodies are not timed here: the body guard bounds their size, and a route reads them.
"""
from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)
DEFAULT_HEADER_TIMEOUT_S = 10.0


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol] | str:
    """The protocol class for uvicorn's `http=` option; "auto" (no header bound) without httptools."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:                    # httptools missing: uvicorn's h11 protocol, unbounded headers
        log.warning("httptools is not installed: request headers have no time limit")
        return "auto"

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._header_timer is None:         # the connection's own deadline is never extended
                self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol

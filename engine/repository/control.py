"""Model control, as Triton's: `none` loads every model at start, `explicit` loads and unloads on request,
`poll` loads every model and then watches the folder. A load that fails never takes down a serving version."""
from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidRequest

if TYPE_CHECKING:
    from engine.engine import Engine

log = logging.getLogger(__name__)


class ControlMode(str, enum.Enum):
    NONE = "none"
    EXPLICIT = "explicit"
    POLL = "poll"


@dataclass(frozen=True)
class ModelState:
    name: str
    version: str
    state: str           # READY | UNAVAILABLE | LOADING
    reason: str = ""

    def as_index(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "state": self.state, "reason": self.reason}


class ModelControl:
    def __init__(self, engine: "Engine", mode: ControlMode | str = ControlMode.NONE,
                 startup: list[str] | None = None, poll_secs: float = 15.0) -> None:
        self.engine, self.mode, self.poll_secs = engine, ControlMode(mode), poll_secs
        self.startup = startup or []
        self._states: dict[str, ModelState] = {}
        self._seen: dict[str, tuple] = {}
        self._poller: asyncio.Task | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        everything = self.mode != ControlMode.EXPLICIT or "*" in self.startup
        for name in self.engine.repository.names() if everything else self.startup:
            await self._try_load(name)
        if self.mode == ControlMode.POLL:
            self._poller = asyncio.create_task(self._poll_forever())

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        await self.engine.stop()

    # -- the repository extension ---------------------------------------------------------------------
    async def load(self, name: str, override: Any = None) -> None:
        self._require_explicit("load")
        config = self.engine.repository.config(name, override=override)   # unknown model: ModelNotFound
        for step in config.steps:                       # an ensemble brings up the models it runs
            if step.model not in {m.name for m in self.engine.models()}:
                await self.load(step.model)
        await self._load(name, config)

    async def unload(self, name: str) -> None:
        self._require_explicit("unload")
        self.engine.repository.config(name)
        if name in {m.name for m in self.engine.models()}:
            await self.engine.unload(name)
        self._states[name] = ModelState(name, self._states.get(name, ModelState(name, "", "")).version,
                                        "UNAVAILABLE", "unloaded")

    def index(self, ready_only: bool = False) -> list[ModelState]:
        states = {m.name: ModelState(m.name, m.config.version, "READY") for m in self.engine.models()}
        for name in self.engine.repository.names():
            if name not in states:
                states[name] = self._states.get(name) or ModelState(name, "", "UNAVAILABLE", "unloaded")
            elif self._states.get(name) and self._states[name].reason:
                states[name] = ModelState(name, states[name].version, "READY", self._states[name].reason)
        listed = [states[n] for n in sorted(states)]
        return [s for s in listed if s.state == "READY"] if ready_only else listed

    def state(self, name: str) -> ModelState | None:
        return self._states.get(name)

    # -- poll mode ------------------------------------------------------------------------------------
    async def poll_once(self) -> None:
        names = set(self.engine.repository.names())
        for name in sorted(names):
            fingerprint = self.engine.repository.fingerprint(name)
            if self._seen.get(name) != fingerprint:
                await self._try_load(name)
        for name in sorted(set(self._seen) - names):
            self._seen.pop(name, None)
            if name in {m.name for m in self.engine.models()}:
                await self.engine.unload(name)
            self._states.pop(name, None)

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_secs)
            try:
                await self.poll_once()
            except Exception:                                  # keep watching whatever went wrong
                log.exception("repository poll failed")

    # -- loading --------------------------------------------------------------------------------------
    async def _try_load(self, name: str) -> None:
        self._seen[name] = self.engine.repository.fingerprint(name)
        try:
            await self._load(name, self.engine.repository.config(name))
        except Exception as exc:                               # recorded; everything else keeps serving
            self._record_failure(name, exc)

    async def _load(self, name: str, config) -> None:
        self._states[name] = ModelState(name, config.version, "LOADING")
        try:
            await self.engine.load(name, config)
        except Exception as exc:
            self._record_failure(name, exc, config.version)
            raise
        self._states[name] = ModelState(name, config.version, "READY")

    def _record_failure(self, name: str, exc: Exception, version: str = "") -> None:
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        serving = next((m for m in self.engine.models() if m.name == name), None)
        log.error("model %s failed to load: %s", name, reason)
        if serving is not None:
            reason = f"version {version or '?'} failed to load, serving version {serving.config.version}: {reason}"
            self._states[name] = ModelState(name, serving.config.version, "READY", reason)
        else:
            self._states[name] = ModelState(name, version, "UNAVAILABLE", reason)

    def _require_explicit(self, action: str) -> None:
        if self.mode != ControlMode.EXPLICIT:
            raise InvalidRequest(f"explicit model {action} is not allowed in model control mode "
                                 f"'{self.mode.value}'; start the server with --model-control-mode explicit")


__all__ = ["ControlMode", "ModelControl", "ModelState"]

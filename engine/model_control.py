"""Model control, as Triton's: `none` loads every model at start, `explicit` loads and unloads on request,
`poll` loads every model and then watches the folder. A load that fails never takes down a serving version."""
from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass
from typing import Any

from conch.engine.engine import Engine
from conch.engine.errors import InvalidRequest
from conch.engine.tensors.warmup import warm_up

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
    """Which versions of which models the engine serves. A model serves every version its version policy
    selects; versions it no longer selects are retired only once all the selected ones are up, so a broken new
    version leaves the serving ones in place."""

    def __init__(self, engine: Engine, mode: ControlMode | str = ControlMode.NONE,
                 startup: list[str] | None = None, poll_secs: float = 15.0) -> None:
        self.engine, self.mode, self.poll_secs = engine, ControlMode(mode), poll_secs
        self.startup = startup or []
        self._states: dict[str, ModelState] = {}    # a model's last failure or LOADING/unloaded; not READY ones
        self._seen: dict[str, tuple] = {}           # model -> fingerprint of its folder (poll mode)
        self._loaded_from: dict[tuple[str, str], tuple] = {}   # (model, version) -> fingerprint it loaded from
        self._poller: asyncio.Task | None = None
        self._refreshing = asyncio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        everything = self.mode != ControlMode.EXPLICIT or "*" in self.startup
        if everything:
            for name in self.engine.repository.names():
                await self._try_load(name)
        else:                          # `--load-model ensemble` brings up the models it runs, as a load does
            started: set[str] = set()
            for name in self.startup:
                await self._try_load_with_steps(name, started)
        if self.mode == ControlMode.POLL:
            self._poller = asyncio.create_task(self._poll_forever())

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        await self.engine.stop()

    # -- the repository extension ---------------------------------------------------------------------
    async def refresh(self) -> None:
        """Explicit mode: bring object-storage repositories up to date, so that the index and a load see what
        the buckets hold now (poll mode refreshes on each poll; `none` never looks again)."""
        if self.mode == ControlMode.EXPLICIT:
            await self._sync()

    async def _sync(self) -> None:
        """A bucket that cannot be read now leaves the last copy in place (logged; serving goes on)."""
        if self.engine.repository.mirrors:
            async with self._refreshing:
                try:
                    await asyncio.to_thread(self.engine.repository.refresh)
                except Exception as exc:
                    log.warning("object-storage repository not refreshed: %s: %s", type(exc).__name__, exc)

    async def load(self, name: str, override: Any = None) -> None:
        """(Re)load every version the policy selects; raises the first version's failure."""
        self._require_explicit("load")
        await self.refresh()
        try:
            config = self.engine.repository.config(name, override=override)   # unknown model: ModelNotFound
        except InvalidRequest as exc:                   # a config that does not read: the index says why
            self._record_failure(name, exc)
            raise
        for step in config.steps:                       # an ensemble brings up the models it runs
            if not self.engine.versions(step.model):
                await self.load(step.model)
        failures = await self._serve(name, config, override)
        if failures:
            raise failures[0]

    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        """Stop serving a model; with `unload_dependents` (Triton's), an ensemble's steps go too, recursively,
        except those another ensemble that stays loaded still runs."""
        self._require_explicit("unload")
        config = self.engine.repository.config(name)
        if self.engine.versions(name):
            config = self.engine.get(name).config
            await self.engine.unload(name)
        self._states[name] = ModelState(name, self._states.get(name, ModelState(name, "", "")).version,
                                        "UNAVAILABLE", "unloaded")
        if unload_dependents:
            for step in {s.model for s in config.steps}:
                if self.engine.versions(step) and not self._runs_in_loaded_ensemble(step):
                    await self.unload(step, unload_dependents=True)

    def _runs_in_loaded_ensemble(self, name: str) -> bool:
        return any(step.model == name for m in self.engine.all_versions() for step in m.config.steps)

    def index(self, ready_only: bool = False) -> list[ModelState]:
        """One entry per served version (READY, with the reason a newer one failed), else the model's state;
        an ensemble whose step is missing is UNAVAILABLE with the reason."""
        listed = []
        for name in sorted(set(self.engine.repository.names()) | {m.name for m in self.engine.models()}):
            failure = self._states.get(name)
            versions = self.engine.versions(name)
            missing = self.engine.missing_steps(name)
            if missing:
                listed += [ModelState(name, v, "UNAVAILABLE", f"ensemble step(s) {', '.join(missing)} not loaded")
                           for v in versions]
            elif versions:
                reason = failure.reason if failure is not None and failure.state != "LOADING" else ""
                listed += [ModelState(name, v, "READY", reason) for v in versions]
            else:
                listed.append(failure or ModelState(name, "", "UNAVAILABLE", "unloaded"))
        return [s for s in listed if s.state == "READY"] if ready_only else listed

    def state(self, name: str) -> ModelState | None:
        return self._states.get(name)

    # -- poll mode ------------------------------------------------------------------------------------
    async def poll_once(self) -> None:
        await self._sync()
        names = set(self.engine.repository.names())
        for name in sorted(names):
            if self._seen.get(name) != self.engine.repository.fingerprint(name):
                await self._try_load(name)
        for name in sorted(set(self._seen) - names):
            self._seen.pop(name, None)
            if self.engine.versions(name):
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
        """Serve what the folder holds now, reloading only versions whose files changed; failures are
        recorded and everything else keeps serving."""
        self._seen[name] = self.engine.repository.fingerprint(name)
        try:
            await self._serve(name, self.engine.repository.config(name), changed_only=True)
        except Exception as exc:                               # the config itself is broken
            self._record_failure(name, exc)

    async def _try_load_with_steps(self, name: str, started: set[str]) -> None:
        """Load a model named at start after the steps it runs (recursively, each once); a failure is
        recorded as `_try_load` records it, and the ensemble then reports its missing step."""
        if name in started:
            return
        started.add(name)
        try:
            steps = self.engine.repository.config(name).steps
        except Exception as exc:                               # unknown or broken: recorded, as at load
            self._record_failure(name, exc)
            return
        for step in steps:
            await self._try_load_with_steps(step.model, started)
        await self._try_load(name)

    async def _serve(self, name: str, config, override: Any = None,
                     changed_only: bool = False) -> list[Exception]:
        """Load the versions the policy selects, then retire the others if all of them came up."""
        repository, failures = self.engine.repository, []
        wanted = repository.served_versions(name, config)
        for version in wanted:
            files = repository.fingerprint(name, version)
            unchanged = self._loaded_from.get((name, version)) == files and version in self.engine.versions(name)
            if changed_only and unchanged:
                continue
            self._states[name] = ModelState(name, version, "LOADING")
            try:
                await self.engine.load(name, config if version == config.version
                                       else repository.config(name, version, override), warm=warm_up)
                self._loaded_from[(name, version)] = files
            except Exception as exc:
                failures.append((version, exc))
        self._states.pop(name, None)
        if failures:
            self._record_failure(name, failures[0][1], failures[0][0])
            return [exc for _, exc in failures]
        for version in set(self.engine.versions(name)) - set(wanted):
            await self.engine.unload(name, version)
            self._loaded_from.pop((name, version), None)
        return []

    def _record_failure(self, name: str, exc: Exception, version: str = "") -> None:
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        serving = self.engine.versions(name)
        log.error("model %s version %s failed to load: %s", name, version or "?", reason)
        if serving:
            reason = (f"version {version or '?'} failed to load, serving version(s) {', '.join(serving)}: "
                      f"{reason}")
            self._states[name] = ModelState(name, serving[-1], "READY", reason)
        else:
            self._states[name] = ModelState(name, version, "UNAVAILABLE", reason)

    def _require_explicit(self, action: str) -> None:
        if self.mode != ControlMode.EXPLICIT:
            raise InvalidRequest(f"explicit model {action} is not allowed in model control mode "
                                 f"'{self.mode.value}'; start the server with --model-control-mode explicit")


__all__ = ["ControlMode", "ModelControl", "ModelState"]

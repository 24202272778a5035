"""Triton's trace extension: GET/POST /v2/trace/setting and /v2/models/{m}/trace/setting (gRPC TraceSetting),
and the trace file, written as Triton writes it: a JSON array whose entries name a traced request (id,
model_name, model_version, request_id) and give its timestamps (REQUEST_START, QUEUE_START, COMPUTE_START,
COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END, REQUEST_END; steady-clock ns).

Settings (values are strings, trace_level a list, as Triton answers them):
    trace_level    ["OFF"] or ["TIMESTAMPS"] (TENSORS is refused by name: tensors are not traced)
    trace_rate     trace one request in every N (default "1000")
    trace_count    how many more traces to write; "-1" = no limit
    log_frequency  "0": each trace is appended to the file as it ends; N > 0: the same (Conch never holds
                   traces back, so a crash loses none)
    trace_file     the file the server was started with (`--trace-file`); a client may not name another
                   (it could write anywhere the server may), so a different value is a 400
    trace_mode     the server's mode, "triton" or "opentelemetry" (`--trace-config mode=...`, docs/tracing.md);
                   fixed at start: another value is a 400
A model's own settings override the global ones; POSTing a setting as null clears the model's override.
The tracer is an engine observer: it sees every finished request of every face.
"""
from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

from conch.engine.admission import Trace
from conch.engine.errors import InvalidRequest

DEFAULTS: dict[str, Any] = {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                            "log_frequency": "0", "trace_file": "", "trace_mode": "triton"}
_LEVELS = ("OFF", "TIMESTAMPS")
_NUMBERS = {"trace_rate": 1, "trace_count": -1, "log_frequency": 0}     # setting -> its lowest value


class Tracer:
    def __init__(self, trace_file: Path | None = None, mode: str = "triton") -> None:
        self.file = trace_file
        self.globals: dict[str, Any] = {**DEFAULTS, "trace_file": str(trace_file or ""), "trace_mode": mode}
        self.models: dict[str, dict[str, Any]] = {}      # model -> its overrides
        self._seen: dict[str, int] = {}                  # model -> requests seen while its tracing is on
        self._ids = itertools.count(1)
        self._lock = threading.Lock()                    # one writer of the file at a time

    # -- settings -----------------------------------------------------------------------------------------
    def settings(self, model: str | None = None) -> dict[str, Any]:
        return {**self.globals, **(self.models.get(model, {}) if model else {})}

    def update(self, changes: dict[str, Any], model: str | None = None) -> dict[str, Any]:
        checked = {key: self._checked(key, value) for key, value in changes.items()}
        if model is None:
            self.globals.update({k: v if v is not None else DEFAULTS[k] for k, v in checked.items()})
        else:
            own = self.models.setdefault(model, {})
            for key, value in checked.items():
                if value is None:
                    own.pop(key, None)
                else:
                    own[key] = value
        return self.settings(model)

    def _checked(self, key: str, value: Any) -> Any:
        if key not in DEFAULTS:
            raise InvalidRequest(f"unknown trace setting '{key}'; settings: {sorted(DEFAULTS)}", param=key)
        if value is None:
            return None
        if key == "trace_level":
            levels = [value] if isinstance(value, str) else value
            if not isinstance(levels, list) or not levels or any(v not in _LEVELS for v in levels):
                raise InvalidRequest(f"trace_level must be a list of {list(_LEVELS)} (TENSORS is not "
                                     f"supported), got {value!r}", param=key)
            if levels != ["OFF"] and self.file is None:
                raise InvalidRequest("tracing needs a trace file: start the server with --trace-file PATH",
                                     param=key)
            return ["OFF"] if levels == ["OFF"] else [v for v in levels if v != "OFF"]
        text = value[0] if isinstance(value, list) and len(value) == 1 else value
        if key in _NUMBERS:
            if not isinstance(text, (str, int)) or isinstance(text, bool) or not _integer(str(text), _NUMBERS[key]):
                raise InvalidRequest(f"trace setting '{key}' must be an integer >= {_NUMBERS[key]}", param=key)
            return str(text)
        if key == "trace_file" and str(text) != self.globals["trace_file"]:
            raise InvalidRequest("trace_file cannot be changed over the API: the server writes the file it was "
                                 "started with (--trace-file)", param=key)
        if key == "trace_mode" and text != self.globals["trace_mode"]:
            raise InvalidRequest(f"trace_mode cannot be changed over the API: the server runs in mode "
                                 f"{self.globals['trace_mode']!r} (--trace-config mode=triton|opentelemetry)",
                                 param=key)
        return str(text)

    # -- the engine observer ------------------------------------------------------------------------------
    def on_finish(self, trace: Trace) -> None:
        settings = self.settings(trace.model)
        if settings["trace_level"] == ["OFF"] or self.file is None or settings["trace_count"] == "0":
            return
        seen = self._seen[trace.model] = self._seen.get(trace.model, 0) + 1
        if (seen - 1) % int(settings["trace_rate"]):
            return
        if settings["trace_count"] != "-1":
            self._count_down(trace.model, int(settings["trace_count"]) - 1)
        record = _record(next(self._ids), trace)
        threading.Thread(target=self._append, args=(record,), daemon=True).start()   # no file work on the loop

    def _count_down(self, model: str, left: int) -> None:
        (self.models[model] if "trace_count" in self.models.get(model, {}) else self.globals)["trace_count"] = \
            str(left)

    def _append(self, records: list[dict]) -> None:
        """Appends to the file's JSON array (seeking back over its closing bracket), so it is always valid."""
        if self.file is None:
            return
        data = json.dumps(records, separators=(",", ":"))[1:-1].encode()
        with self._lock:
            if not self.file.exists() or self.file.stat().st_size < 2:
                self.file.write_bytes(b"[" + data + b"]")
                return
            with self.file.open("r+b") as f:
                f.seek(-1, 2)
                f.write(b"," + data + b"]")


def _integer(text: str, lowest: int) -> bool:
    try:
        return int(text) >= lowest
    except ValueError:
        return False


def _record(trace_id: int, t: Trace) -> list[dict]:
    """Triton's two entries of one trace: who it is, then its timestamps (ns)."""
    def ns(seconds: float) -> int:
        return int(seconds * 1e9)

    end = t.end or t.start
    compute = t.start + t.queued
    stamps = [("REQUEST_START", t.start), ("QUEUE_START", t.start), ("COMPUTE_START", compute),
              ("COMPUTE_INPUT_END", compute + t.compute_input), ("COMPUTE_OUTPUT_START", end - t.compute_output),
              ("COMPUTE_END", end), ("REQUEST_END", end)]
    prepared = t.request.prompt_token_ids is not None                # an LLM's: "<engine key>.<label>"
    label = t.request.id.partition(".")[2] if prepared else t.request.id
    return [{"id": trace_id, "model_name": t.model, "model_version": int(t.version) if t.version.isdigit() else -1,
             "request_id": label},
            {"id": trace_id, "timestamps": [{"name": name, "ns": ns(at)} for name, at in stamps]}]

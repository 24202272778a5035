"""`--trace-config`, as Triton spells it: `mode=triton|opentelemetry`, `level=OFF|TIMESTAMPS`, `rate=N` (trace
one request in N), `count=N`, and the OpenTelemetry exporter's settings `opentelemetry,url=...`,
`opentelemetry,resource=KEY=VALUE` (repeatable), `opentelemetry,bsp_max_queue_size=N`,
`opentelemetry,bsp_schedule_delay=MS`, `opentelemetry,bsp_max_export_batch_size=N`; plus Conch's own
`opentelemetry,protocol=http|grpc` (OTLP over HTTP/protobuf, Triton's only one, or over gRPC). Anything else is
refused by name."""
from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_URL = {"http": "http://localhost:4318/v1/traces", "grpc": "http://localhost:4317"}
_BSP = {"bsp_max_queue_size": "max_queue_size", "bsp_schedule_delay": "schedule_delay_millis",
        "bsp_max_export_batch_size": "max_export_batch_size"}


@dataclass(frozen=True)
class TraceConfig:
    mode: str = "triton"                 # triton: trace files (--trace-file); opentelemetry: OTLP export
    level: str | None = None             # None: TIMESTAMPS under opentelemetry (asking for it means spans)
    rate: int = 1000                     # Triton's default: one request in 1000
    count: int = -1                      # -1: no limit (triton mode's setting; OTel samples by rate)
    url: str | None = None
    protocol: str = "http"
    resource: dict[str, str] = field(default_factory=dict)
    bsp: dict[str, int] = field(default_factory=dict)        # BatchSpanProcessor keyword -> value

    @property
    def opentelemetry(self) -> bool:
        return self.mode == "opentelemetry" and (self.level or "TIMESTAMPS") != "OFF"

    @property
    def endpoint(self) -> str:
        url = self.url or DEFAULT_URL[self.protocol]
        return url if "://" in url else f"http://{url}"      # Triton's examples name host:port/path

    @classmethod
    def parse(cls, entries: list[str]) -> TraceConfig:
        values: dict = {"resource": {}, "bsp": {}}
        for entry in entries:
            section, _, setting = entry.partition(",") if "," in entry.split("=", 1)[0] else ("", "", entry)
            key, eq, value = setting.partition("=")
            if not eq or not value:
                raise ValueError(f"--trace-config {entry!r}: expected [SECTION,]KEY=VALUE")
            _SECTIONS.get(section, _unknown_section)(values, key, value, entry)
        return cls(**values)


def _global(values: dict, key: str, value: str, entry: str) -> None:
    if key == "mode" and value in ("triton", "opentelemetry"):
        values["mode"] = value
    elif key == "level" and value in ("OFF", "TIMESTAMPS"):
        values["level"] = value
    elif key in ("rate", "count") and _integer(value, 1 if key == "rate" else -1):
        values[key] = int(value)
    else:
        raise ValueError(f"--trace-config {entry!r}: expected mode=triton|opentelemetry, level=OFF|TIMESTAMPS, "
                         f"rate=N (>= 1) or count=N")


def _otel(values: dict, key: str, value: str, entry: str) -> None:
    if key == "url":
        values["url"] = value
    elif key == "protocol" and value in ("http", "grpc"):
        values["protocol"] = value
    elif key == "resource" and "=" in value:
        name, _, text = value.partition("=")
        values["resource"][name] = text
    elif key in _BSP and _integer(value, 1):
        values["bsp"][_BSP[key]] = int(value)
    else:
        raise ValueError(f"--trace-config {entry!r}: opentelemetry settings are url=, protocol=http|grpc, "
                         f"resource=KEY=VALUE, {', '.join(f'{k}=N' for k in _BSP)}")


def _unknown_section(values: dict, key: str, value: str, entry: str) -> None:
    raise ValueError(f"--trace-config {entry!r}: unknown section (use KEY=VALUE or opentelemetry,KEY=VALUE)")


def _integer(text: str, lowest: int) -> bool:
    try:
        return int(text) >= lowest
    except ValueError:
        return False


_SECTIONS = {"": _global, "opentelemetry": _otel}

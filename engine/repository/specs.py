"""What a config declares beyond the backend: tensors, the version policy and an ensemble's steps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conch.engine.errors import InvalidRequest

DATATYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BYTES", "BF16")


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str            # KServe v2 names: BYTES, BOOL, INT32, FP32...
    dims: tuple[int, ...] = (-1,)   # -1 = any size
    optional: bool = False

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "TensorSpec":
        datatype = str(data.get("datatype", data.get("data_type", ""))).upper().removeprefix("TYPE_")
        datatype = "BYTES" if datatype == "STRING" else datatype
        if datatype not in DATATYPES or "name" not in data:
            raise InvalidRequest(f"tensor {data!r} needs a name and one of the datatypes {DATATYPES}",
                                 param="config")
        dims = tuple(int(d) for d in data.get("dims", (-1,)))
        return cls(str(data["name"]), datatype, dims, bool(data.get("optional", False)))

    def as_metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.dims)}


@dataclass(frozen=True)
class VersionPolicy:
    """Triton's version policy: the latest N versions (default 1), all of them, or specific ones."""

    kind: str = "latest"     # latest | all | specific
    num: int = 1
    versions: tuple[int, ...] = ()

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> "VersionPolicy":
        if not data:
            return cls()
        if "all" in data:
            return cls("all")
        if "specific" in data:
            versions = (data["specific"] or {}).get("versions", ())
            return cls("specific", versions=tuple(sorted(int(v) for v in versions)))
        if "latest" in data:
            return cls("latest", num=int((data["latest"] or {}).get("num_versions", 1)))
        raise InvalidRequest(f"unknown version_policy {data!r}", param="config")

    def select(self, available: list[int]) -> list[int]:
        """The versions to serve out of those on disk, ascending."""
        available = sorted(available)
        if self.kind == "all":
            return available
        if self.kind == "specific":
            return [v for v in available if v in self.versions]
        return available[-max(1, self.num):]


@dataclass(frozen=True)
class EnsembleStep:
    """One step: `input_map` is step input -> ensemble tensor, `output_map` step output -> ensemble tensor."""

    model: str
    input_map: tuple[tuple[str, str], ...]
    output_map: tuple[tuple[str, str], ...]
    version: int = -1        # -1: the newest version the step model serves

    @property
    def model_version(self) -> str | None:
        return str(self.version) if self.version >= 0 else None

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "EnsembleStep":
        name = data.get("model_name", data.get("model"))
        if not name:
            raise InvalidRequest(f"ensemble step {data!r} names no model", param="config")
        return cls(str(name), _pairs(data.get("input_map")), _pairs(data.get("output_map")),
                   int(data.get("model_version", -1)))


def _pairs(mapping: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(mapping, list):   # protobuf's JSON of a map may come as [{"key":..., "value":...}]
        return tuple((str(m["key"]), str(m["value"])) for m in mapping)
    return tuple((str(k), str(v)) for k, v in (mapping or {}).items())


def tensor_specs(items: Any) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec.from_mapping(i) for i in items or ())


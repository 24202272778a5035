"""KServe v2 infer bodies over HTTP: JSON tensors plus the binary tensor data extension.

With `Inference-Header-Content-Length: N` the first N bytes are the JSON header and the rest holds the
raw data of each input that declares `parameters.binary_data_size`, in order. Outputs asked for with
`binary_data` (or all of them with `binary_data_output`) come back the same way. An input or output may
name a registered system shared memory region instead (gateway/kserve/shared_memory.py).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.tensors.interface import InferRequest, Tensors, datatype_of
from conch.gateway.kserve.codec import check_shape, from_json_data, from_raw, to_json_data, to_raw
from conch.gateway.kserve.shared_memory import ShmReference, SystemSharedMemory

HEADER = "Inference-Header-Content-Length"


@dataclass(frozen=True)
class WantedOutput:
    name: str
    binary: bool
    shm: ShmReference | None = None      # written into this shared memory region, not the body
    classes: int = 0                     # > 0: the classification extension's top classes of the output


@dataclass(frozen=True)
class ParsedInfer:
    request: InferRequest
    given_id: str | None
    outputs: tuple[WantedOutput, ...] | None     # None: every output
    binary_default: bool


def parse_infer(raw: bytes, header_length: str | None, shm: SystemSharedMemory | None = None) -> ParsedInfer:
    split = _header_length(header_length, len(raw))
    header, data = (raw[:split], raw[split:]) if split is not None else (raw, b"")
    body = _json(header)
    parameters = _mapping(body.get("parameters"), "parameters")
    inputs = body.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise InvalidRequest("'inputs' must be a non-empty list of tensors", param="inputs")
    tensors: Tensors = {}
    offset = 0
    for item in inputs:
        name, array, used = _input(item, data, offset, shm)
        if name in tensors:
            raise InvalidRequest(f"input '{name}' is given twice", param=name)
        tensors[name], offset = array, offset + used
    if offset != len(data):
        raise InvalidRequest(f"{len(data) - offset} bytes of binary data follow the inputs unused")
    outputs = body.get("outputs")
    given_id = body.get("id")
    request = InferRequest(str(given_id) if given_id is not None else uuid.uuid4().hex, tensors,
                           {k: v for k, v in parameters.items() if k != "binary_data_output"})
    return ParsedInfer(request, str(given_id) if given_id is not None else None,
                       None if outputs is None else tuple(_wanted(o) for o in _list(outputs, "outputs")),
                       bool(parameters.get("binary_data_output", False)))


def render_infer(parsed: ParsedInfer, outputs: Tensors, model_name: str, version: str,
                 shm: SystemSharedMemory | None = None) -> tuple[bytes, int | None]:
    """(body, JSON header length when binary data follows)."""
    wanted = parsed.outputs or tuple(WantedOutput(n, parsed.binary_default) for n in outputs)
    entries, blobs = [], []
    for want in wanted:
        array = outputs.get(want.name)
        if array is None:
            continue
        entry: dict[str, Any] = {"name": want.name, "datatype": datatype_of(array), "shape": list(array.shape)}
        if want.shm is not None and shm is not None:
            shm.write(want.shm, array, want.name)
            entry["parameters"] = want.shm.as_parameters()
        elif want.binary:
            blob = to_raw(array)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = to_json_data(array)
        entries.append(entry)
    body: dict[str, Any] = {"model_name": model_name, "model_version": version, "outputs": entries}
    if parsed.given_id is not None:
        body["id"] = parsed.given_id
    header = json.dumps(body, separators=(",", ":")).encode()
    return (header + b"".join(blobs), len(header)) if blobs else (header, None)


def _input(item: Any, data: bytes, offset: int, shm: SystemSharedMemory | None) -> tuple[str, Any, int]:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise InvalidRequest("each input needs a 'name'", param="inputs")
    name = item["name"]
    datatype = item.get("datatype")
    if not isinstance(datatype, str):
        raise InvalidRequest(f"input '{name}' needs a 'datatype'", param=name)
    shape = check_shape(item.get("shape"), name)
    params = _mapping(item.get("parameters"), name)
    ref = ShmReference.from_parameters(params, name)
    if ref is not None:
        if shm is None:
            raise InvalidRequest(f"input '{name}': shared memory is not available here", param=name)
        return name, shm.read(ref, datatype, shape, name), 0
    size = params.get("binary_data_size")
    if size is not None:
        if not isinstance(size, int) or size < 0 or offset + size > len(data):
            raise InvalidRequest(f"input '{name}': binary_data_size {size!r} overruns the binary data", param=name)
        return name, from_raw(data[offset:offset + size], datatype, shape, name), size
    if "data" not in item:
        raise InvalidRequest(f"input '{name}' has neither 'data' nor binary data", param=name)
    return name, from_json_data(item["data"], datatype, shape, name), 0


def _wanted(item: Any) -> WantedOutput:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise InvalidRequest("each requested output needs a 'name'", param="outputs")
    params = _mapping(item.get("parameters"), item["name"])
    classes = params.get("classification", 0)
    if isinstance(classes, bool) or not isinstance(classes, int) or classes < 0:
        raise InvalidRequest(f"output '{item['name']}': classification must be a positive integer",
                             param="classification")
    return WantedOutput(item["name"], bool(params.get("binary_data", False)),
                        ShmReference.from_parameters(params, item["name"]), classes)


def _header_length(value: str | None, total: int) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or int(value) > total:
        raise InvalidRequest(f"{HEADER} {value!r} is not a length within the body")
    return int(value)


def _json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:   # JSONDecodeError, UnicodeDecodeError, a 4,300-digit int
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return body


def _mapping(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest(f"'parameters' of '{name}' must be a JSON object", param=name)
    return value


def _list(value: Any, name: str) -> list:
    if not isinstance(value, list):
        raise InvalidRequest(f"'{name}' must be a list", param=name)
    return value

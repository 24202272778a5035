"""The request's output constraint: OpenAI's `response_format` or vLLM's `structured_outputs` /
`guided_*` extensions, turned into one `grammars` spec and validated up front (400 naming the field)."""
from __future__ import annotations

import json
from typing import Any, Callable

from grammars import Choice, Grammar, GrammarError, JsonObject, JsonSchema, Regex, validate
from gateway.errors import APIError


def _schema(value: Any, param: str) -> JsonSchema:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise APIError(400, f"'{param}' is not valid JSON", param=param, code="invalid_schema") from None
    if not isinstance(value, (dict, bool)):
        raise APIError(400, f"'{param}' must be a JSON Schema object", param=param, code="invalid_schema")
    return JsonSchema.from_dict(value)


def _response_format(value: dict[str, Any]) -> Any:
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonObject()
    if kind == "json_schema":
        inner = value.get("json_schema")
        if not isinstance(inner, dict) or "schema" not in inner:
            raise APIError(400, "response_format.json_schema.schema is required", param="response_format.json_schema")
        unknown = set(inner) - {"name", "schema", "strict", "description"}
        if unknown:
            raise APIError(400, f"unsupported fields in response_format.json_schema: {sorted(unknown)}",
                           param="response_format.json_schema")
        return _schema(inner["schema"], "response_format.json_schema.schema")
    raise APIError(400, f"response_format.type must be text, json_object or json_schema, not {kind!r}",
                   param="response_format.type")


_STRUCTURED: dict[str, Callable[[Any], Any]] = {
    "json": lambda v: _schema(v, "structured_outputs.json"),
    "json_object": lambda v: JsonObject() if v else None,
    "regex": Regex,
    "choice": lambda v: Choice(tuple(v)),
    "grammar": Grammar,
}

_GUIDED: dict[str, Callable[[Any], Any]] = {
    "guided_json": lambda v: _schema(v, "guided_json"),
    "guided_regex": Regex,
    "guided_choice": lambda v: Choice(tuple(v)),
    "guided_grammar": Grammar,
}


def _structured_outputs(value: dict[str, Any]) -> Any:
    kinds = [k for k in value if value[k] is not None]
    unknown = [k for k in kinds if k not in _STRUCTURED]
    if unknown:
        raise APIError(400, f"unsupported structured_outputs fields: {unknown}",
                       param=f"structured_outputs.{unknown[0]}")
    if len(kinds) != 1:
        raise APIError(400, "structured_outputs needs exactly one of json, regex, choice, grammar",
                       param="structured_outputs")
    return _STRUCTURED[kinds[0]](value[kinds[0]])


def output_spec(body: Any) -> tuple[Any, str | None]:
    """The one grammar spec the body asks for (or None), and the field it came from."""
    found: list[tuple[str, Any]] = []
    if getattr(body, "response_format", None) is not None:
        found.append(("response_format", _response_format(body.response_format)))
    if getattr(body, "structured_outputs", None) is not None:
        found.append(("structured_outputs", _structured_outputs(body.structured_outputs)))
    for name, build in _GUIDED.items():
        if getattr(body, name, None) is not None:
            found.append((name, build(getattr(body, name))))
    found = [(name, spec) for name, spec in found if spec is not None]
    if len(found) > 1:
        raise APIError(400, f"only one output constraint may be given, got {[n for n, _ in found]}",
                       param=found[1][0])
    if not found:
        return None, None
    param, spec = found[0]
    try:
        validate(spec)
    except GrammarError as exc:
        code = "unsupported_schema" if exc.keyword else "invalid_grammar"
        raise APIError(400, exc.message, param=param, code=code) from exc
    return spec, param

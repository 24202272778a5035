"""The last step of normalizing one schema node: formats and no-op keywords.

Runs on a node already spelled in 2020-12 terms and stripped to its dialect's validation keywords
(grammars/dialects.py). A known `format` stays (it is enforced), `byte` becomes the base64 pattern
when the node has no pattern of its own, and any other format is an annotation and goes. Keywords
whose value asks nothing (`uniqueItems: false`, `minProperties: 0`, an `if` with neither `then` nor
`else`, a lone `then`) go too, so that they are never refused.
"""

from __future__ import annotations

from typing import Any, Callable

from .schema_keywords import BASE64_PATTERN, FORMATS

Node = dict[str, Any]


def clean_node(node: Node) -> Node:
    out = dict(node)
    for keyword, is_noop in _NOOPS.items():
        if keyword in out and is_noop(out):
            del out[keyword]
    if "format" in out:
        _format(out)
    return out


def _format(node: Node) -> None:
    value = node.pop("format")
    if value in FORMATS:
        node["format"] = value
    elif value == "byte" and "pattern" not in node:
        node["pattern"] = BASE64_PATTERN


_NOOPS: dict[str, Callable[[Node], bool]] = {
    "uniqueItems": lambda node: node["uniqueItems"] is False,
    "minProperties": lambda node: node["minProperties"] == 0,
    "minContains": lambda node: "contains" not in node,
    "maxContains": lambda node: "contains" not in node,
    "if": lambda node: "then" not in node and "else" not in node,
    "then": lambda node: "if" not in node,
    "else": lambda node: "if" not in node,
}

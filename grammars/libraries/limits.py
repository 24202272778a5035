"""Refusing, by name, the JSON Schema keywords and formats a library accepts but does not enforce."""

from __future__ import annotations

from ..errors import GrammarError
from ..schema_walk import Node, iter_nodes


def refuse_unenforced(
    schema: Node, library: str, unenforced: dict[str, str], formats: frozenset[str]
) -> None:
    """GrammarError naming the first keyword in `unenforced` (keyword -> why) or format not in `formats`."""
    for path, node in iter_nodes(schema):
        where = path or "/"
        for keyword in node:
            if keyword in unenforced:
                why = unenforced[keyword]
                raise GrammarError(f"{library} does not enforce {keyword!r} (at '{where}'): {why}", keyword)
        fmt = node.get("format")
        if fmt is not None and fmt not in formats:
            raise GrammarError(f"{library} does not enforce format {fmt!r} exactly (at '{where}')", "format")

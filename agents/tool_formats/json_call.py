"""The formats whose calls are JSON objects, `{"name": "f", "arguments": {...}}` (hermes, llama3, mistral):
they differ only in the key the arguments go under and the text around and between calls."""
from __future__ import annotations

import json
from typing import Any, ClassVar

from conch.agents.tool_formats.base import ToolFormat
from conch.agents.tool_formats.grammar import inline_json
from conch.agents.tools import ToolFunction


class JsonCallFormat(ToolFormat):
    ARGUMENTS_KEY: ClassVar[str] = "arguments"

    def write_call(self, name: str, arguments: Any) -> str:
        return json.dumps({"name": name, self.ARGUMENTS_KEY: arguments}, ensure_ascii=False)

    def function_rules(self, k: int, index: int, tool: ToolFunction) -> list[str]:
        """`{"name": "f", "arguments": ARGS}` with ARGS constrained by the tool's parameters schema."""
        head = json.dumps('{"name": ' + json.dumps(tool.name) + f', "{self.ARGUMENTS_KEY}": ')
        return [f'fn_{k}: {head} args_{k} "}}"', f"args_{k}: {inline_json(tool.schema)}"]

"""Gemma 3: Python calls in a ```tool_code block, as Google's function-calling guide for Gemma prompts them.

    ```tool_code
    get_weather(city="Paris")
    add(a=1, b=2)
    ```

One keyword call per line (values are Python or JSON literals, read as pythonic.py reads them); text before
and after the block is content. A call is valid once its closing ')' is seen and `ast` accepts it as a
literal keyword call; if one breaks, the text from the end of the last good call is content. The closing
fence may be missing at the end of the text. The grammar of a forced choice is pythonic's calls, one per line.
"""
from __future__ import annotations

from conch.agents.tool_formats.pythonic import PythonicFormat
from conch.agents.tool_formats.reading.content import match_literal, skip_whitespace
from conch.agents.tool_formats.reading.parser import ToolParser
from conch.agents.tool_formats.reading.python_call import CallScanner

FENCE_OPEN, FENCE_CLOSE = "```tool_code", "```"


class Gemma3Parser(ToolParser):
    name = "gemma3"
    MARKERS = (FENCE_OPEN,)
    _scanner: CallScanner

    def _on_marker(self, marker: str) -> None:
        self._state = self._call

    def _call(self) -> bool:
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            return self._fail(pos) if self._final else False
        self._scanner, self._pos, self._state = CallScanner(), pos, self._read_call
        return True

    def _read_call(self) -> bool:
        return self._python_call(self._scanner, self._after_call_state)

    def _after_call_state(self) -> bool:
        """Another call, the closing fence, or (at the end of the text) nothing."""
        pos = skip_whitespace(self._buf, self._pos)
        if pos == len(self._buf):
            if not self._final:
                return False
            self._pos = pos
            return self._end_region()
        matched = match_literal(self._buf, pos, FENCE_CLOSE)
        if matched:
            self._pos = pos + matched
            return self._end_region()
        if matched == 0:
            return self._fail(len(self._buf)) if self._final else False
        self._pos, self._state = pos, self._call
        return True


class Gemma3Format(PythonicFormat):
    name = "gemma3"
    parser = Gemma3Parser  # type: ignore[assignment]
    INSTRUCTION = ("To call functions, answer with a tool_code block of Python calls with keyword arguments, one "
                   "per line, and nothing else:\n```tool_code\n<function name>(<argument name>=<value>, ...)\n```")
    LIST_OPEN, LIST_CLOSE, SEPARATOR = FENCE_OPEN + "\n", "\n" + FENCE_CLOSE, "\n"

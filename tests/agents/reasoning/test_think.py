"""The <think> reasoning format: documented shapes (Qwen3's and DeepSeek-R1's model cards), read whole and
one character at a time, and the reply's start read from the prompt."""
from __future__ import annotations

import pytest

from conch.agents.reasoning import Phase, ReasoningDelta, get_reasoning, reasoning_for_template
from conch.agents.tools import ContentDelta

THINK = get_reasoning("think")


def split(text: str, phase: Phase, step: int | None = None) -> tuple[str, str]:
    """(reasoning, content) of `text`, fed whole or `step` characters at a time."""
    parser = THINK.new_parser(phase)
    pieces = [text] if step is None else [text[i:i + step] for i in range(0, len(text), step)]
    events = [e for piece in pieces for e in parser.feed(piece)] + parser.finish()
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    return reasoning, content


CASES = [
    # Qwen3: the model opens the block itself (the prompt ends at "<|im_start|>assistant\n")
    (Phase.BEFORE, "<think>\nThe user greets me.\n</think>\n\nHello!", "The user greets me.", "Hello!"),
    # DeepSeek-R1: the template's generation prompt already holds "<think>\n"
    (Phase.THINKING, "First, 9.11 < 9.8.\n</think>\n\n9.8 is greater.", "First, 9.11 < 9.8.", "9.8 is greater."),
    # a call after the thinking is content for the tool parser; a call inside it is thought
    (Phase.BEFORE, '<think>\nI could <tool_call>x</tool_call>\n</think>\n\n<tool_call>\n{"name": "f"}\n</tool_call>',
     "I could <tool_call>x</tool_call>", '<tool_call>\n{"name": "f"}\n</tool_call>'),
    # thinking off (Qwen3 enable_thinking false wrote the empty block into the prompt): all answer, tags too
    (Phase.ANSWER, '{"a": "<think>"}', "", '{"a": "<think>"}'),
    # no block at all: all answer
    (Phase.BEFORE, "  Hi there", "", "Hi there"),
    # a block cut by max_tokens: all reasoning
    (Phase.BEFORE, "<think>\nstill going", "still going", ""),
    (Phase.THINKING, "cut </thi", "cut </thi", ""),
]


@pytest.mark.parametrize("step", [None, 1, 3])
@pytest.mark.parametrize("phase, text, reasoning, content", CASES)
def test_split(phase, text, reasoning, content, step):
    assert split(text, phase, step) == (reasoning, content)


def test_start_phase_from_prompt():
    assert THINK.start_phase("<|im_start|>assistant\n") is Phase.BEFORE
    assert THINK.start_phase("<|Assistant|><think>\n") is Phase.THINKING
    assert THINK.start_phase("<|im_start|>assistant\n<think>\n\n</think>\n\n") is Phase.ANSWER


def test_chosen_from_template():
    assert reasoning_for_template("{{ '<think>' }}{{ x }}{{ '</think>' }}") is THINK
    assert reasoning_for_template("{{ messages }}") is None
    assert reasoning_for_template(None) is None

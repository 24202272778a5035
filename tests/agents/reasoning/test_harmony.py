"""The harmony reasoning format (gpt-oss): documented message runs from OpenAI's harmony guide, read whole and
in pieces of every small size: analysis is reasoning, final is the answer, a call passes on to the tool parser."""
from __future__ import annotations

import pytest

from conch.agents.reasoning import Phase, ReasoningDelta, get_reasoning, reasoning_for_template
from conch.agents.tool_formats import get_format
from conch.agents.tools import ContentDelta

HARMONY = get_reasoning("harmony")
CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "Tokyo"}<|call|>'


def split(text: str, phase: Phase, step: int | None = None) -> tuple[str, str]:
    parser = HARMONY.new_parser(phase)
    pieces = [text] if step is None else [text[i:i + step] for i in range(0, len(text), step)]
    events = [e for piece in pieces for e in parser.feed(piece)] + parser.finish()
    return ("".join(e.text for e in events if isinstance(e, ReasoningDelta)),
            "".join(e.text for e in events if isinstance(e, ContentDelta)))


CASES = [
    (Phase.BEFORE, "<|channel|>analysis<|message|>User asks a sum.<|end|><|start|>assistant<|channel|>final"
                   "<|message|>2 + 2 = 4.<|return|>", "User asks a sum.", "2 + 2 = 4."),
    (Phase.BEFORE, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" + CALL,
     "Need the weather.", "<|start|>assistant" + CALL),   # a call's header passes on whole
    (Phase.BEFORE, "<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant" + CALL,
     "", "Checking now.<|start|>assistant" + CALL),
    (Phase.THINKING, "still thinking <|en", "still thinking <|en", ""),
    (Phase.BEFORE, "  Plain answer, no channels.", "", "Plain answer, no channels."),
    (Phase.BEFORE, "<|channel|>analysis<|message|>cut by max_tokens", "cut by max_tokens", ""),
]


@pytest.mark.parametrize("step", [None, 1, 2, 3, 7])
@pytest.mark.parametrize("phase, text, reasoning, content", CASES)
def test_split(phase, text, reasoning, content, step):
    assert split(text, phase, step) == (reasoning, content)


def test_the_call_it_passes_on_parses():
    _, content = split("<|channel|>analysis<|message|>x<|end|><|start|>assistant" + CALL, Phase.BEFORE, 1)
    parsed = get_format("harmony").new_parser().parse(content)
    assert parsed.content is None and [(c.name, c.arguments) for c in parsed.tool_calls] == \
        [("get_weather", '{"location":"Tokyo"}')]


def test_chosen_from_a_harmony_template_and_the_reply_start():
    template = "{{ '<|start|>assistant<|channel|>analysis<|message|>' }}{{ '</think>' }}"
    assert reasoning_for_template(template) is HARMONY
    assert HARMONY.start_phase("<|start|>user<|message|>hi<|end|><|start|>assistant") is Phase.BEFORE
    assert HARMONY.start_phase("<|start|>assistant<|channel|>analysis<|message|>") is Phase.THINKING

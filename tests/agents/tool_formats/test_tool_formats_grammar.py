"""Every format's grammar against its own parser: random walks through the compiled grammar (what a
random-weights model under constrained decoding writes) always parse back (the parser given the offered
tools, as the gateway gives them: the XML formats type bare values from the schemas), whole and streamed token by token
(eagerly, as a forced choice is read), into 1..max_calls calls of the offered tools (exactly one of the named
tool), each with arguments valid under its schema, and no content."""
from __future__ import annotations

import codecs

import pytest

from conch.agents.tool_choice import ToolChoice
from conch.agents.tool_formats import format_names, get_format
from conch.agents.tools import assemble
from tests.agents.tool_formats.formats_cases import TOOLS, check_calls
from tests.grammars.conftest import load_compiler, load_info
from tests.grammars.drive import random_walk

SEEDS = range(12)
MAX_CALLS = 3


def _walks(fmt_name: str, choice: ToolChoice, max_calls: int):
    grammar = get_format(fmt_name).grammar(TOOLS, choice, max_calls)
    compiled, info = load_compiler("llguidance").compile(grammar), load_info()
    for seed in SEEDS:
        walk = random_walk(compiled, info, seed, max_steps=600)
        assert walk.finished, (seed, walk.text)
        yield walk, info


@pytest.mark.parametrize("fmt_name", format_names())
def test_required_walks_parse_back_to_one_to_max_calls(fmt_name):
    fmt, counts = get_format(fmt_name), set()
    for walk, info in _walks(fmt_name, ToolChoice("required"), MAX_CALLS):
        parsed = fmt.new_parser(tools=TOOLS).parse(walk.text)
        assert parsed.content is None and 1 <= len(parsed.tool_calls) <= MAX_CALLS, walk.text
        check_calls(parsed, {t.name for t in TOOLS})
        counts.add(len(parsed.tool_calls))
        streamed = fmt.new_parser(eager=True, tools=TOOLS)
        decoder = codecs.getincrementaldecoder("utf-8")()  # a token may end inside a character
        pieces = [decoder.decode(info.token_bytes[t]) for t in walk.tokens if t not in info.eos_token_ids]
        events = [e for p in pieces for e in streamed.feed(p)] + streamed.finish()
        assert [(c.name, c.arguments) for c in assemble(events).tool_calls] == \
            [(c.name, c.arguments) for c in parsed.tool_calls]
    assert len(counts) > 1, counts  # parallel calls happen: some walks hold more than one


@pytest.mark.parametrize("fmt_name", format_names())
def test_named_walks_parse_back_to_exactly_that_call(fmt_name):
    fmt = get_format(fmt_name)
    for tool in TOOLS:
        for walk, _ in _walks(fmt_name, ToolChoice("function", tool.name), MAX_CALLS):
            parsed = fmt.new_parser(tools=TOOLS).parse(walk.text)
            assert parsed.content is None and len(parsed.tool_calls) == 1, walk.text
            check_calls(parsed, {tool.name})


@pytest.mark.parametrize("fmt_name", format_names())
def test_auto_and_none_have_no_grammar(fmt_name):
    for mode in ("auto", "none"):
        assert get_format(fmt_name).grammar(TOOLS, ToolChoice(mode), MAX_CALLS) is None


@pytest.mark.parametrize("fmt_name", format_names())
def test_a_bound_of_one_allows_a_single_call(fmt_name):
    fmt = get_format(fmt_name)
    for walk, _ in _walks(fmt_name, ToolChoice("required"), 1):
        assert len(fmt.new_parser(tools=TOOLS).parse(walk.text).tool_calls) == 1

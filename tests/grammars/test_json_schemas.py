"""The schema suite over every installed library: random allowed tokens always give valid JSON.

For each schema and library: validate (a library may refuse a schema it cannot enforce, naming
the keyword; the default library refuses none), compile, then walk random tokens drawn from the
mask. Whenever the walk finishes, the text must parse and validate with jsonschema, formats
included. Bounded schemas must finish within BOUNDED_MAX_TOKENS.
"""

from __future__ import annotations

import pytest

from conch.grammars import GrammarError, JsonSchema, validate
from conch.grammars.libraries import DEFAULT_LIBRARY

from .checking import validate_output
from .conftest import LIBRARIES, load_compiler
from .drive import random_walk
from .schemas import BOUNDED_MAX_TOKENS, SCHEMAS, SchemaCase

SEEDS = (0, 1)
UNBOUNDED_STEPS = 200
SLOW = {("outlines", "any_object")}  # outlines-core spends ~8 s building an Index for any JSON object


def _params() -> list:
    return [
        pytest.param(library, case, id=f"{library}-{case.name}",
                     marks=[pytest.mark.slow] if (library, case.name) in SLOW else [])
        for library in LIBRARIES
        for case in SCHEMAS
    ]


def test_suite_is_large_and_mixed():
    assert len(SCHEMAS) >= 30
    assert sum(case.bounded for case in SCHEMAS) >= 20
    assert len({case.name for case in SCHEMAS}) == len(SCHEMAS)


@pytest.mark.parametrize("library, case", _params())
def test_random_outputs_validate(library: str, case: SchemaCase, info):
    compiler = load_compiler(library)
    spec = JsonSchema.from_dict(case.schema)
    try:
        validate(spec, library)
    except GrammarError as exc:
        assert library != DEFAULT_LIBRARY, f"the default library must enforce the whole suite: {exc}"
        assert exc.keyword, "a refusal names the keyword"
        pytest.skip(f"{library} refuses: {exc.message}")
    grammar = compiler.compile(spec)
    finished = 0
    for seed in SEEDS:
        walk = random_walk(grammar, info, seed, BOUNDED_MAX_TOKENS if case.bounded else UNBOUNDED_STEPS)
        if case.bounded:
            assert walk.finished, f"bounded schema did not finish in {BOUNDED_MAX_TOKENS} tokens: {walk.text[:200]!r}"
        if walk.finished:
            validate_output(case.schema, walk.text)
            finished += 1
    assert finished, "no walk finished, so nothing was checked"

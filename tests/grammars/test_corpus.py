"""The real-world corpus (tests/grammars/corpus.py) over every installed library.

Each schema is either refused, naming a validation keyword (never an annotation, an extension or a
dialect), or compiled; then random walks that finish validate under the schema's own dialect. The
Kubernetes-style schemas are all accepted by the default library.
"""

from __future__ import annotations

import pytest

from conch.grammars.dialects import dialect_of
from conch.grammars.libraries import DEFAULT_LIBRARY
from conch.grammars.schema_keywords import REFUSED

from .conftest import LIBRARIES
from .corpus import corpus, survey

# Keywords a library may name beyond REFUSED: what it cannot enforce exactly (see grammars/libraries/).
LIBRARY_LIMITS = frozenset({"oneOf", "allOf", "format", "pattern", "$ref", "properties", "required", "minLength",
                            "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                            "items", "prefixItems", "anyOf", "enum", "const", "type", "additionalProperties"})
SLOW = frozenset({"azure-pipelines", "renovate", "snapcraft", "compose-spec", "mergify"})  # megabyte-scale meta checks


def _params() -> list:
    return [pytest.param(lib, case, id=f"{lib}-{case.name}",
                         marks=[pytest.mark.slow] if case.name in SLOW else [])
            for lib in LIBRARIES for case in corpus()]


def test_corpus_is_real_and_large():
    assert sum(case.source == "SchemaStore" for case in corpus()) >= 20
    assert any(case.source == "hand-written" for case in corpus())


@pytest.mark.parametrize("library, case", _params())
def test_corpus_schema_is_compiled_or_refused_by_a_validation_keyword(library, case):
    dialect_of(case.schema)  # never refused for its dialect
    outcome = survey(library, case)
    if outcome.refusal is not None:
        keyword, message = outcome.refusal.keyword, outcome.refusal.message
        if keyword is None:  # a library's size limit (outlines), never the default library's
            assert library != DEFAULT_LIBRARY and "too large" in message, message
        else:
            assert keyword in REFUSED | LIBRARY_LIMITS, f"refused for {keyword!r}: {message}"
        assert case.source != "hand-written" or library != DEFAULT_LIBRARY, outcome.refusal.message

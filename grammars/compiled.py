"""A grammar compiled for one tokenizer by one library: immutable, shared, a factory of matchers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .matcher import Matcher
from .spec import GrammarSpec


@dataclass(frozen=True, eq=False)
class CompiledGrammar:
    """The result of `GrammarCompiler.compile`; safe to share between requests and threads.

    `spec` is the spec as compiled, lowered (a Choice is its Regex, a JsonObject its JsonSchema),
    which is also how the cache knows them apart. `compile_seconds` is the wall time the library
    spent building it; a cache hit returns this same object and costs nothing.
    """

    spec: GrammarSpec
    library: str
    tokenizer_fingerprint: str
    compile_seconds: float
    new_matcher: Callable[[], Matcher] = field(repr=False)

    def matcher(self) -> Matcher:
        """A fresh matcher at the start of the grammar, for one sequence."""
        return self.new_matcher()

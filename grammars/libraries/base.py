"""What a grammar library adapter provides: a cheap capability check and three builders.

An adapter is built once per tokenizer (it converts the tokenizer into the library's own form,
which can take a second) and then compiles specs. Specs reach it lowered (grammars/lowering.py):
a JSON schema, a regex or a Lark grammar. Each builder returns a factory of matchers.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Callable, ClassVar

from ..bitmask import vocabulary_row
from ..bounds import DEFAULT_BOUNDS, GenerationBounds
from ..compiled import CompiledGrammar
from ..json_keys import KeyCheck, KeyRules, key_vocabulary
from ..lowering import LoweredSpec, lower
from ..matcher import Matcher
from ..spec import Grammar, GrammarSpec, JsonSchema, Regex
from ..tokenizer import TokenizerInfo

MatcherFactory = Callable[[], Matcher]


class Library(ABC):
    name: ClassVar[str]
    build_checks: ClassVar[bool] = False    # building refuses all that check_lowered refuses, as it does

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        self.tokenizer = tokenizer
        # (W,) int32 every matcher ANDs into its row: no special tokens, no EOS, nothing past V.
        self.keep_row = vocabulary_row(tokenizer.vocab_size, tokenizer.special_token_ids)
        self.key_vocabulary = key_vocabulary(tokenizer)  # for the key check of JSON outputs (json_keys.py)

    @classmethod
    def check(cls, spec: GrammarSpec, bounds: GenerationBounds = DEFAULT_BOUNDS) -> None:
        """Raise GrammarError if this library cannot honour `spec` exactly. No tokenizer, no compiling.

        Called after the library-neutral checks of `grammars.validate`, so the spec is well formed.
        What is checked is the generation form that `compile` builds.
        """
        cls.check_lowered(cls.lower(spec, bounds))

    @classmethod
    def lower(cls, spec: GrammarSpec, bounds: GenerationBounds) -> LoweredSpec:
        return lower(spec, cls.bounds_for(bounds))

    @classmethod
    def bounds_for(cls, bounds: GenerationBounds) -> GenerationBounds:
        """The generation bounds this library can add without refusing its own output; by default all."""
        return bounds

    @classmethod
    def check_lowered(cls, spec: LoweredSpec) -> None:
        """`check` on the lowered form; by default every lowered spec is honoured."""
        return None

    def compile(self, spec: GrammarSpec, bounds: GenerationBounds = DEFAULT_BOUNDS) -> CompiledGrammar:
        """Build `spec` (already validated for this library); GrammarError if the library fails."""
        lowered = self.lower(spec, bounds)
        builders: dict[type, Callable[..., MatcherFactory]] = {
            JsonSchema: self._build_json,
            Regex: self._build_regex,
            Grammar: self._build_lark,
        }
        start = time.perf_counter()
        factory = builders[type(lowered)](lowered)
        if isinstance(lowered, JsonSchema):
            rules = KeyRules.for_schema(lowered.as_dict(), bounds.max_extra_keys, bounds.max_string_length)
            factory = self._checking_keys(factory, rules)
        elapsed = time.perf_counter() - start
        return CompiledGrammar(lowered, self.name, self.tokenizer.fingerprint, elapsed, factory)

    def _checking_keys(self, factory: MatcherFactory, rules: KeyRules) -> MatcherFactory:
        """Matchers with the key check beside the grammar (json_keys.py). Its bounds are the model's own
        `max_extra_keys` and `max_string_length`, for every library: `bounds_for` drops them only from the
        generation form."""
        vocabulary = self.key_vocabulary
        return lambda: factory().checking_keys(KeyCheck(vocabulary, rules))

    @abstractmethod
    def _build_json(self, spec: JsonSchema) -> MatcherFactory: ...

    @abstractmethod
    def _build_regex(self, spec: Regex) -> MatcherFactory: ...

    @abstractmethod
    def _build_lark(self, spec: Grammar) -> MatcherFactory: ...

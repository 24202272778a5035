"""llguidance, the default: Earley parsing with lazily built lexers, so compiling costs milliseconds.

Its grammar converter doubles as Conch's schema oracle: `check_lowered` runs it without a
tokenizer (a fraction of a millisecond) and refuses what it cannot prove, such as a `oneOf`
whose branches might overlap. The other adapters call it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch
from llguidance import LLMatcher

from ..errors import GrammarError
from ..lark_json import map_inline_schemas
from ..lowering import JSON_WHITESPACE, LoweredSpec
from ..matcher import Matcher
from ..spec import Grammar, JsonSchema, Regex
from ..tokenizer import TokenizerInfo
from .base import Library, MatcherFactory
from .llguidance_vocab import llguidance_tokenizer

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions     # a TypedDict of the stubs only

_JSON_OPTIONS: JsonCompileOptions = {"whitespace_pattern": JSON_WHITESPACE}

_GRAMMAR_TEXT: dict[type, Callable[..., str]] = {
    JsonSchema: lambda spec: LLMatcher.grammar_from_json_schema(spec.schema, overrides=_JSON_OPTIONS),
    Regex: lambda spec: LLMatcher.grammar_from_regex(spec.pattern),
    Grammar: lambda spec: LLMatcher.grammar_from_lark(map_inline_schemas(spec.lark, _with_json_options)),
}


def _with_json_options(schema: Any) -> Any:
    """An inline schema with Conch's JSON whitespace (llguidance reads options from "x-guidance")."""
    return {"x-guidance": _JSON_OPTIONS, **schema} if isinstance(schema, dict) else schema


def grammar_text(spec: LoweredSpec) -> str:
    """llguidance's serialized grammar for a lowered spec (no validation yet)."""
    try:
        return _GRAMMAR_TEXT[type(spec)](spec)
    except ValueError as exc:
        raise GrammarError(f"llguidance cannot read the spec: {exc}") from None


def check_with_llguidance(spec: LoweredSpec) -> None:
    """GrammarError with llguidance's reason if its converter refuses the spec."""
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar_text(spec))
    if is_error:
        raise _error(messages[0] if messages else "invalid grammar")


def _error(raw: str) -> GrammarError:
    first = raw.strip().splitlines()[0] if raw.strip() else raw
    if "oneOf" in first:
        return GrammarError(
            "'oneOf' is only supported when its branches cannot overlap (told apart by type, by a const/enum "
            "property, or by required properties the other branches lack); use 'anyOf'", "oneOf")
    if "allOf" in first or "intersect" in first.lower():
        return GrammarError(f"this 'allOf' cannot be enforced: {first}", "allOf")
    return GrammarError(first)


class LLGuidanceLibrary(Library):
    name = "llguidance"
    build_checks = True                     # LLMatcher refuses a grammar as validate_grammar_with_warnings does

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        super().__init__(tokenizer)
        self._tokenizer = llguidance_tokenizer(tokenizer)   # added non-special tokens as text

    @classmethod
    def check_lowered(cls, spec: LoweredSpec) -> None:
        check_with_llguidance(spec)

    def _build_json(self, spec: JsonSchema) -> MatcherFactory:
        return self._build(grammar_text(spec))

    def _build_regex(self, spec: Regex) -> MatcherFactory:
        return self._build(grammar_text(spec))

    def _build_lark(self, spec: Grammar) -> MatcherFactory:
        return self._build(grammar_text(spec))

    def _build(self, grammar: str) -> MatcherFactory:
        template = LLMatcher(self._tokenizer, grammar, log_level=0)  # never mutated; copied per sequence
        if template.is_error():
            raise _error(template.get_error())
        tokenizer, keep_row = self.tokenizer, self.keep_row
        return lambda: LLGuidanceMatcher(tokenizer, keep_row, template.deep_copy())


class LLGuidanceMatcher(Matcher):
    def __init__(self, tokenizer: TokenizerInfo, keep_row: torch.Tensor, inner: LLMatcher) -> None:
        super().__init__(tokenizer, keep_row)
        self._inner = inner

    def _fill(self, bitmask: torch.Tensor, row: int) -> None:
        target = bitmask[row]
        self._inner.unsafe_compute_mask_ptr(target.data_ptr(), target.numel() * target.element_size())

    def _advance(self, token_id: int) -> bool:
        return self._inner.try_consume_tokens([token_id]) == 1  # a refused token leaves no error state

    def _accepting(self) -> bool:
        return self._inner.is_accepting()

    def _stopped(self) -> bool:
        return self._inner.is_stopped()

    def _undo(self, num_tokens: int) -> None:
        self._inner.rollback(num_tokens)

    def _forced(self) -> list[int]:
        return self._inner.compute_ff_tokens()

    def _failure(self) -> str | None:
        error = self._inner.get_error()
        return error.strip().splitlines()[0] if error and error.strip() else None

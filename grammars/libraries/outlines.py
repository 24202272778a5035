"""outlines-core: a regex per spec, compiled into a token-level automaton (an Index) up front.

Compiling is the slow part (about 0.1-1 s on a 49k vocabulary); matching is a table lookup.
Lark grammars are beyond it. `check_lowered` refuses the schemas it would not enforce exactly
(see outlines_schema.py). Known limitation of outlines-core 0.2.14: an Index drops the edges out
of an accepting state into a non-accepting one, so `[0-9]+(\\.[0-9]+)?` only ever yields integers;
outputs stay valid, some valid outputs become unreachable.
"""

from __future__ import annotations

import json
from dataclasses import replace

import outlines_core
import torch

from ..bounds import GenerationBounds
from ..errors import GrammarError
from ..lowering import JSON_WHITESPACE, LoweredSpec
from ..matcher import Matcher
from ..spec import Grammar, JsonSchema, Regex
from ..tokenizer import TokenizerInfo
from .base import Library, MatcherFactory
from .llguidance import check_with_llguidance
from .outlines_schema import check_outlines_schema

MAX_ROLLBACK = 8192  # tokens an outlines Guide remembers; rollback beyond it is refused
# Longest schema regex outlines may index: `{"type": "object"}` (6,900 characters) takes ~8 s on a 49k
# vocabulary, and SchemaStore's changie schema (45,000) ran for minutes at 9 GB before it was stopped.
MAX_SCHEMA_REGEX = 8000


class OutlinesLibrary(Library):
    name = "outlines"

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        super().__init__(tokenizer)
        self._vocabulary = _vocabulary(tokenizer)

    @classmethod
    def bounds_for(cls, bounds: GenerationBounds) -> GenerationBounds:
        """Numbers and strings stay unbounded under outlines-core: it enforces no number bounds (they would be
        refused), and a bounded string is a state per character in its index (a schema of a few 256-character
        strings took minutes to index)."""
        return replace(bounds, max_integer_digits=None, max_fraction_digits=None, max_string_length=None,
                       max_extra_keys=None, max_ref_depth=None)

    @classmethod
    def check_lowered(cls, spec: LoweredSpec) -> None:
        if isinstance(spec, Grammar):
            raise GrammarError("outlines-core cannot enforce Lark grammars; use the llguidance or xgrammar library")
        check_with_llguidance(spec)
        if isinstance(spec, JsonSchema):
            check_outlines_schema(json.loads(spec.schema))
            size = len(_schema_regex(spec))
            if size > MAX_SCHEMA_REGEX:
                raise GrammarError(f"the schema is too large for outlines-core (a regex of {size} characters; at most "
                                   f"{MAX_SCHEMA_REGEX}); use llguidance")

    def _build_json(self, spec: JsonSchema) -> MatcherFactory:
        return self._build_regex(Regex(_schema_regex(spec)))

    def _build_regex(self, spec: Regex) -> MatcherFactory:
        try:
            index = outlines_core.Index(spec.pattern, self._vocabulary)
        except (ValueError, TypeError) as exc:
            raise GrammarError(f"outlines-core cannot compile the regex: {exc}") from None
        stopped = _StoppedStates(index, frozenset(self.tokenizer.eos_token_ids))
        tokenizer, keep_row = self.tokenizer, self.keep_row
        return lambda: OutlinesMatcher(tokenizer, keep_row, outlines_core.Guide(index, MAX_ROLLBACK), stopped)

    def _build_lark(self, spec: Grammar) -> MatcherFactory:
        raise GrammarError("outlines-core cannot enforce Lark grammars; use the llguidance or xgrammar library")


def _schema_regex(spec: JsonSchema) -> str:
    try:
        return outlines_core.json_schema.build_regex_from_schema(spec.schema, JSON_WHITESPACE)
    except (ValueError, TypeError) as exc:
        raise GrammarError(f"outlines-core cannot convert the schema: {exc}") from None


def _vocabulary(tokenizer: TokenizerInfo) -> "outlines_core.Vocabulary":
    """outlines' byte-keyed vocabulary: every non-special token, EOS given apart."""
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, raw in enumerate(tokenizer.token_bytes):
        if raw and token_id not in tokenizer.special_token_ids:
            by_bytes.setdefault(raw, []).append(token_id)
    return outlines_core.Vocabulary(tokenizer.eos_token_ids[0], by_bytes)


class _StoppedStates:
    """Per Index, memo of which states allow nothing but EOS; shared by its matchers (GIL-safe)."""

    def __init__(self, index: "outlines_core.Index", eos: frozenset[int]) -> None:
        self._index, self._eos = index, eos
        self._memo: dict[int, bool] = {}

    def __call__(self, state: int) -> bool:
        if state not in self._memo:  # only a final state can be stopped; skip listing the others' tokens
            final = self._index.is_final_state(state)
            self._memo[state] = final and all(t in self._eos for t in self._index.get_allowed_tokens(state) or [])
        return self._memo[state]


class OutlinesMatcher(Matcher):
    def __init__(self, tokenizer: TokenizerInfo, keep_row: torch.Tensor, guide, stopped: _StoppedStates) -> None:
        super().__init__(tokenizer, keep_row)
        self._guide, self._stopped_state = guide, stopped

    def _fill(self, bitmask: torch.Tensor, row: int) -> None:
        target = bitmask[row]
        self._guide.write_mask_into(target.data_ptr(), target.numel(), target.element_size())

    def _advance(self, token_id: int) -> bool:
        try:
            self._guide.advance(token_id, return_tokens=False)
        except ValueError:  # no edge for this token; the guide's state is unchanged
            return False
        return True

    def _accepting(self) -> bool:
        return self._guide.is_finished()

    def _stopped(self) -> bool:
        return self._stopped_state(self._guide.get_state())

    def _undo(self, num_tokens: int) -> None:
        self._guide.rollback_state(num_tokens)

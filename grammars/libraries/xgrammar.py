"""xgrammar (optional extra `conch[xgrammar]`): pushdown automata with precomputed token masks.

xgrammar accepts JSON Schema keywords it does not enforce without a word, so Conch never relies
on it to refuse a schema: the library-neutral checks and llguidance's converter decide first, and
`check_lowered` refuses what xgrammar was seen to let through (UNENFORCED, XGRAMMAR_FORMATS).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from typing import Any, Callable

import torch
import xgrammar

from ..bounds import GenerationBounds
from ..errors import GrammarError
from ..lowering import LoweredSpec
from ..matcher import Matcher
from ..schema_keywords import FORMATS
from ..spec import Grammar, JsonSchema, Regex
from ..tokenizer import TokenizerInfo
from .base import Library, MatcherFactory
from .limits import refuse_unenforced
from .llguidance import check_with_llguidance

# Found by the schema suite's random walks (tests/grammars) against xgrammar 0.2.9.
UNENFORCED = {
    "allOf": "its branches are ignored",
    "patternProperties": "not enforced (served by llguidance, the default)",
    "minLength": "length-bounded strings admit raw control characters, which is invalid JSON",
    "maxLength": "length-bounded strings admit raw control characters, which is invalid JSON",
}
XGRAMMAR_FORMATS = FORMATS - {"date", "date-time", "ipv4"}  # Feb 31 passes; so do leading zeros in ipv4


class XGrammarLibrary(Library):
    name = "xgrammar"

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        super().__init__(tokenizer)
        info = xgrammar.TokenizerInfo.from_huggingface(
            tokenizer.hf_tokenizer, vocab_size=tokenizer.vocab_size, stop_token_ids=list(tokenizer.eos_token_ids)
        )
        # Conch caches compiled grammars itself, bounded; xgrammar's own cache would be a second copy.
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=min(8, os.cpu_count() or 1), cache_enabled=False)

    @classmethod
    def bounds_for(cls, bounds: GenerationBounds) -> GenerationBounds:
        """A maxLength would be refused (see UNENFORCED), so strings stay unbounded under xgrammar."""
        return replace(bounds, max_string_length=None, max_extra_keys=None, max_ref_depth=None)

    @classmethod
    def check_lowered(cls, spec: LoweredSpec) -> None:
        if isinstance(spec, Grammar):
            _xgrammar_call(xgrammar.Grammar.from_lark, spec.lark)
            return
        check_with_llguidance(spec)
        if isinstance(spec, Regex):
            _xgrammar_call(xgrammar.Grammar.from_regex, spec.pattern)
        if isinstance(spec, JsonSchema):
            refuse_unenforced(json.loads(spec.schema), "xgrammar", UNENFORCED, XGRAMMAR_FORMATS)

    def _build_json(self, spec: JsonSchema) -> MatcherFactory:
        compiled = _xgrammar_call(
            self._compiler.compile_json_schema, spec.schema, any_whitespace=True, max_whitespace_cnt=1, strict_mode=True
        )
        return self._factory(compiled)

    def _build_regex(self, spec: Regex) -> MatcherFactory:
        return self._factory(_xgrammar_call(self._compiler.compile_regex, spec.pattern))

    def _build_lark(self, spec: Grammar) -> MatcherFactory:
        return self._factory(_xgrammar_call(self._compiler.compile_lark, spec.lark))

    def _factory(self, compiled: "xgrammar.CompiledGrammar") -> MatcherFactory:
        tokenizer, keep_row = self.tokenizer, self.keep_row
        return lambda: XGrammarMatcher(tokenizer, keep_row, xgrammar.GrammarMatcher(compiled))


_LOG_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")  # "[15:35:05] /project/cpp/x.cc:94: "


def _xgrammar_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into xgrammar, turning its errors about the spec into GrammarError."""
    try:
        return function(*args, **kwargs)
    except (RuntimeError, ValueError) as exc:
        lines = str(exc).strip().splitlines() or ["unknown error"]
        raise GrammarError(f"xgrammar cannot compile the spec: {_LOG_PREFIX.sub('', lines[0])}") from None


class XGrammarMatcher(Matcher):
    def __init__(self, tokenizer: TokenizerInfo, keep_row: torch.Tensor, inner: "xgrammar.GrammarMatcher") -> None:
        super().__init__(tokenizer, keep_row)
        self._inner = inner
        self._scratch = torch.zeros((1, keep_row.numel()), dtype=torch.int32)  # for _stopped
        self._step = 0  # bumps on every state change; keys the _stopped memo
        self._stopped_at: tuple[int, bool] = (-1, False)

    def _fill(self, bitmask: torch.Tensor, row: int) -> None:
        self._inner.fill_next_token_bitmask(bitmask, row)

    def _advance(self, token_id: int) -> bool:
        accepted = self._inner.accept_token(token_id)
        self._step += accepted
        return accepted

    def _accepting(self) -> bool:
        return self._inner.is_completed()

    def _stopped(self) -> bool:
        if not self._inner.is_completed():
            return False
        if self._stopped_at[0] != self._step:  # xgrammar cannot say "only EOS" without a mask
            self._inner.fill_next_token_bitmask(self._scratch, 0)
            self._stopped_at = (self._step, not bool((self._scratch[0] & self._keep).any()))
        return self._stopped_at[1]

    def _undo(self, num_tokens: int) -> None:
        self._inner.rollback(num_tokens)
        self._step += 1

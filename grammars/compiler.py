"""`GrammarCompiler`: compile once per (tokenizer, library, spec), match per request.

Compiling is synchronous and may take from microseconds (a cache hit) to a second (outlines on
a large schema); the server calls `compile_async`, which runs it on a worker thread so that a
slow schema never stalls the event loop.
"""

from __future__ import annotations

import asyncio

import torch

from .bitmask import allocate_bitmask
from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .cache import CacheStats, LRUCache
from .compiled import CompiledGrammar
from .errors import GrammarError
from .matcher import Matcher
from .libraries import DEFAULT_LIBRARY, library_class
from .spec import GrammarSpec
from .tokenizer import TokenizerInfo
from .validate import check_spec, validate


class GrammarCompiler:
    """One tokenizer, one library. Thread-safe.

    The cache is keyed by (tokenizer fingerprint, library, lowered spec), so one `LRUCache` may be shared
    by several compilers (pass `cache=`); otherwise each has its own of `cache_size` entries. `bounds`
    (the model's, from its config) limit what a schema lets grow (grammars/bounds.py).
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        library: str = DEFAULT_LIBRARY,
        cache_size: int = 256,
        cache: LRUCache[CompiledGrammar] | None = None,
        bounds: GenerationBounds = DEFAULT_BOUNDS,
    ) -> None:
        self.tokenizer_info = tokenizer_info
        self.library = library
        self.bounds = bounds
        self._backend = library_class(library)(tokenizer_info)  # converts the tokenizer once
        self._cache: LRUCache[CompiledGrammar] = cache if cache is not None else LRUCache(cache_size)

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        """The compiled grammar for `spec`; the same object on every hit. GrammarError if refused."""
        try:
            lowered = self._backend.lower(spec, self.bounds)  # JsonObject() == its schema
        except GrammarError:
            validate(spec, self.library, self.bounds)  # the same refusal, with validate's ordering
            raise
        key = (self.tokenizer_info.fingerprint, self.library, lowered)
        return self._cache.get_or_create(key, lambda: self._compile_new(spec))

    async def compile_async(self, spec: GrammarSpec) -> CompiledGrammar:
        """`compile` on a worker thread."""
        return await asyncio.to_thread(self.compile, spec)

    def cache_stats(self) -> CacheStats:
        return self._cache.stats()

    def _compile_new(self, spec: GrammarSpec) -> CompiledGrammar:
        # compile never enforces less than validate promised; a library whose build refuses what its check
        # refuses (llguidance: one converter) is not asked twice
        if self._backend.build_checks:
            check_spec(spec)
        else:
            validate(spec, self.library, self.bounds)
        return _startable(self._backend.compile(spec, self.bounds), self.tokenizer_info.vocab_size)


_PROBE_CHOICES = 4        # unforced tokens the probe takes: the limits seen so far show by the first
_PROBE_TOKENS = 64        # tokens it takes in all (forced ones are cheap: a tool call's name, a schema's keys)


def _startable(compiled: CompiledGrammar, vocab_size: int) -> CompiledGrammar:
    """`compiled`, if a short walk through it (`_PROBE_CHOICES` free choices) finds no dead end: at each step
    some token (EOS included) is allowed, the library accepts the token it allowed, and reports no limit
    reached. The walk follows the forced tokens, else the lowest allowed id. A grammar whose every rule needs
    itself (`start: start`) allows nothing at the start; a JSON schema whose only string is a special token's
    text (`{"const": "<|im_end|>"}`) allows nothing after the quote (special tokens are never generated as
    text); a grammar past llguidance's limits (a row of 2,000 alternatives, `"a"~100000`) fails on its first
    token. Each would otherwise fail mid-stream."""
    matcher = compiled.matcher()
    mask = allocate_bitmask(1, vocab_size)
    choices = 0
    for step in range(_PROBE_TOKENS):
        if matcher.is_finished() or choices > _PROBE_CHOICES:
            break
        mask.zero_()
        matcher.fill_bitmask(mask, 0)
        token, forced = _next_token(matcher, mask)
        _check_step(matcher, token, step)          # refuses None
        choices += not forced
        if token is None or not matcher.accept(token):
            break
    _check_step(matcher, 0, _PROBE_TOKENS)
    return compiled


def _next_token(matcher: Matcher, mask: torch.Tensor) -> tuple[int | None, bool]:
    """(the token the probe takes: the first forced one, else the lowest allowed id, or None; whether forced)."""
    forced = matcher.forced_tokens()
    if forced and _allows(mask, forced[0]):
        return forced[0], True
    allowed = mask[0].nonzero()
    if not len(allowed):
        return None, False
    word = int(allowed[0])
    bits = int(mask[0, word]) & 0xFFFFFFFF
    return word * 32 + (bits & -bits).bit_length() - 1, False


def _allows(mask: torch.Tensor, token: int) -> bool:
    return bool(int(mask[0, token // 32]) >> (token % 32) & 1)


def _check_step(matcher: Matcher, token: int | None, step: int) -> None:
    failure = matcher.failure()
    if failure is not None:
        raise GrammarError(f"the grammar compiles but cannot be served: {failure}")
    if token is None and step == 0:
        raise GrammarError("the grammar matches no string: no token can start its output (does every "
                           "alternative of a rule refer back to that rule, as in 'start: start'?)")
    if token is None:
        raise GrammarError(f"the grammar cannot be completed: after {step} token(s) no token may follow (is the "
                           "only text it allows a special token's, such as '<|im_end|>'? special tokens are "
                           "never generated as text)")

"""`GrammarCompiler`: compile once per (tokenizer, library, spec), match per request.

Compiling is synchronous and may take from microseconds (a cache hit) to a second (outlines on
a large schema); the server calls `compile_async`, which runs it on a worker thread so that a
slow schema never stalls the event loop.
"""

from __future__ import annotations

import asyncio

from .bitmask import allocate_bitmask
from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .cache import CacheStats, LRUCache
from .compiled import CompiledGrammar
from .errors import GrammarError
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


def _startable(compiled: CompiledGrammar, vocab_size: int) -> CompiledGrammar:
    """`compiled`, if some token (EOS included) may start its output. A grammar whose every rule needs itself
    (`start: start`) matches no string: its first mask would be empty, and no row can sample from nothing."""
    mask = allocate_bitmask(1, vocab_size)
    compiled.matcher().fill_bitmask(mask, 0)
    if not mask.any():
        raise GrammarError("the grammar matches no string: no token can start its output (does every "
                           "alternative of a rule refer back to that rule, as in 'start: start'?)")
    return compiled

"""Constrained decoding: a spec (JSON schema, regex, choice, grammar) -> per-sequence token masks.

Compile once, match per request, mask in one op:

    info = TokenizerInfo.from_hf(tokenizer)                  # once per tokenizer
    compiler = GrammarCompiler(info)                         # once per (tokenizer, library)
    validate(spec)                                           # at the edge: GrammarError -> 400
    grammar = await compiler.compile_async(spec)             # cached
    matcher = grammar.matcher()                              # one per sequence
    bitmask = allocate_bitmask(batch_size, info.vocab_size)  # one per batch
    matcher.fill_bitmask(bitmask, row); apply_bitmask(logits, bitmask); matcher.accept(token)

Imports nothing of Conch.
"""

from .bitmask import allocate_bitmask, apply_bitmask
from .bounds import DEFAULT_BOUNDS, GenerationBounds
from .compiled import CompiledGrammar
from .compiler import GrammarCompiler
from .errors import GrammarError
from .libraries import available_libraries
from .matcher import Matcher
from .spec import Choice, Grammar, GrammarSpec, JsonObject, JsonSchema, Regex
from .tokenizer import TokenizerInfo
from .validate import validate

__all__ = [
    "DEFAULT_BOUNDS",
    "Choice",
    "CompiledGrammar",
    "Grammar",
    "GrammarCompiler",
    "GrammarError",
    "GenerationBounds",
    "GrammarSpec",
    "JsonObject",
    "JsonSchema",
    "Matcher",
    "Regex",
    "TokenizerInfo",
    "allocate_bitmask",
    "apply_bitmask",
    "available_libraries",
    "validate",
]

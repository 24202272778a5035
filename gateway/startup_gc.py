"""Python's cyclic garbage collector held off while `conch serve` starts, and let run again once its models
have loaded.

Why: a start allocates millions of objects that live as long as the server (torch's and transformers' modules,
a tokenizer's vocabulary, the model's module tree), and the collector, triggered every few hundred container
allocations, traverses all of them again at each of its full passes: ~1 s of a GGUF model's 5-6 s start here.
A start makes little cyclic garbage, and what it makes is collected by the first pass after `resume`.

Only the server's own start pauses (cli.py's main); `resume` is a no-op where nothing paused (an in-process
app, a test), so an embedding program's collector is never touched."""
from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """The collector off, if it was on (then `resume` turns it on again)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """The collector on again, if `pause` turned it off."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()

"""The token-mask kernel (native/token_mask.cpp) gives grammars.apply_bitmask's result exactly: disallowed
logits -inf, allowed ones untouched, rows not named left alone, a head wider than the bitmask masked past it."""
from __future__ import annotations

import pytest
import torch
from tests.engine.backends.conch.native_modules import compiled

from conch.grammars import apply_bitmask


@pytest.fixture(scope="module")
def kernel():
    return compiled("token_mask")


@pytest.mark.parametrize("batch,vocab,words,rows", [
    (16, 49152, 1536, list(range(16))),             # SmolLM2's vocabulary, every row constrained
    (5, 1000, 30, [0, 3]),                          # a head wider than the bitmask (960 tokens), two rows
    (4, 70, 3, [3, 1]),                             # the last word partly past the head, rows out of order
    (3, 64, 3, []),                                 # no row: nothing changes
])
def test_matches_apply_bitmask(kernel, batch, vocab, words, rows):
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(batch, vocab, generator=g)
    bitmask = torch.randint(-2**31, 2**31 - 1, (batch, words), dtype=torch.int32, generator=g)
    bitmask[:, words // 2:] = -1                    # whole words allowed, as most of a grammar's mask is not
    bitmask[:, 0] = 0                               # a whole word disallowed
    want, got = logits.clone(), logits.clone()
    apply_bitmask(want, bitmask, rows)
    kernel.apply_token_mask(got, bitmask, torch.tensor(rows, dtype=torch.long))
    assert torch.equal(got, want)
    untouched = [r for r in range(batch) if r not in rows]
    assert torch.equal(got[untouched], logits[untouched])


def test_a_row_out_of_range_is_refused(kernel):
    logits, bitmask = torch.zeros(2, 64), torch.full((2, 2), -1, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="row out of range"):
        kernel.apply_token_mask(logits, bitmask, torch.tensor([2]))

"""grammars/bitmask.py: packing, and apply masks exactly the disallowed tokens, in one op."""

from __future__ import annotations

import pytest
import torch

from conch.grammars import allocate_bitmask, apply_bitmask
from conch.grammars.bitmask import allowed_tokens, bitmask_width, set_tokens, unpack_bitmask, vocabulary_row


def test_allocate_allows_exactly_the_vocabulary():
    mask = allocate_bitmask(3, 100)
    assert mask.shape == (3, bitmask_width(100)) == (3, 4) and mask.dtype == torch.int32
    assert allowed_tokens(mask, 2).tolist() == list(range(100))
    assert allocate_bitmask(1, 64).shape == (1, 2)


def test_set_tokens_round_trips_every_bit_position():
    mask = torch.zeros((1, 3), dtype=torch.int32)
    ids = [0, 1, 30, 31, 32, 63, 64, 95]
    set_tokens(mask, 0, ids, allowed=True)
    assert allowed_tokens(mask, 0).tolist() == ids
    set_tokens(mask, 0, [31, 63], allowed=False)
    assert allowed_tokens(mask, 0).tolist() == [0, 1, 30, 32, 64, 95]


def test_vocabulary_row_excludes_ids():
    row = vocabulary_row(70, [0, 2, 69])
    assert unpack_bitmask(row.unsqueeze(0))[0].nonzero().flatten().tolist() == [1] + list(range(3, 69))


def _random_mask(batch: int, vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random bitmask and the bool (batch, vocab) matrix it encodes."""
    generator = torch.Generator().manual_seed(seed)
    allowed = torch.rand((batch, vocab), generator=generator) < 0.3
    mask = torch.zeros((batch, bitmask_width(vocab)), dtype=torch.int32)
    for row in range(batch):
        set_tokens(mask, row, allowed[row].nonzero().flatten().tolist(), allowed=True)
    return mask, allowed


def test_apply_masks_exactly_the_disallowed_tokens():
    mask, allowed = _random_mask(4, 1000, seed=0)
    logits = torch.randn(4, 1000)
    before = logits.clone()
    apply_bitmask(logits, mask)
    assert torch.equal(torch.isneginf(logits), ~allowed)
    assert torch.equal(logits[allowed], before[allowed])


def test_apply_masks_logit_columns_past_the_vocabulary():
    mask, allowed = _random_mask(2, 100, seed=1)  # 4 words = 128 columns
    logits = torch.zeros(2, 160)  # a model head wider than the tokenizer
    apply_bitmask(logits, mask)
    assert torch.equal(torch.isneginf(logits[:, :100]), ~allowed)
    assert bool(torch.isneginf(logits[:, 100:]).all())


def test_apply_touches_only_the_given_rows():
    mask, allowed = _random_mask(3, 64, seed=2)
    logits = torch.zeros(3, 64)
    apply_bitmask(logits, mask, rows=[0, 2])
    assert torch.equal(torch.isneginf(logits[0]), ~allowed[0])
    assert not bool(torch.isneginf(logits[1]).any())
    assert torch.equal(torch.isneginf(logits[2]), ~allowed[2])


def test_apply_rows_and_wide_logits_together():
    mask, allowed = _random_mask(2, 64, seed=4)
    logits = torch.zeros(2, 80)
    apply_bitmask(logits, mask, rows=torch.tensor([1]))
    assert not bool(torch.isneginf(logits[0]).any())
    assert torch.equal(torch.isneginf(logits[1, :64]), ~allowed[1]) and bool(torch.isneginf(logits[1, 64:]).all())


def test_unpack_matches_bit_arithmetic():
    mask = torch.tensor([[-1, 0, -(2**31), 5]], dtype=torch.int32)
    bits = unpack_bitmask(mask)[0]
    assert bits[:32].all() and not bits[32:64].any()
    assert bits[64:96].nonzero().flatten().tolist() == [31] and bits[96:].nonzero().flatten().tolist() == [0, 2]


def test_apply_works_in_half_precision():
    mask, allowed = _random_mask(2, 64, seed=3)
    logits = torch.zeros(2, 64, dtype=torch.bfloat16)
    apply_bitmask(logits, mask)
    assert torch.equal(torch.isneginf(logits), ~allowed)


def test_apply_refuses_mismatched_shapes():
    with pytest.raises(ValueError):
        apply_bitmask(torch.zeros(2, 64), allocate_bitmask(3, 64))

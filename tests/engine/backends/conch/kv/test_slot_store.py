"""The slot KV store: what it holds against its byte budget (a zeroed store at the longest sequence's
capacity, an unzeroed one by need and by the pages its slots keep), and that growing moves the stored tokens."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from conch.engine.backends.conch.kv.slot_store import COLUMN_STEP, SlotKVStore, StorePolicy

RESERVED = StorePolicy.RESERVED


@dataclass
class _Cell:
    """A slot's occupant (a Sequence, in the runner): its count of tokens whose KV the slot holds."""
    computed: int = -1


def test_a_zeroed_store_admits_within_its_byte_budget_at_the_longest_capacity_and_frees_when_idle():
    layers, kv_heads, head_dim = 2, 2, 16
    per_token = layers * 2 * kv_heads * head_dim * 4
    kv = SlotKVStore(layers, kv_heads, head_dim, torch.float32, 3 * COLUMN_STEP * per_token, 8)
    assert kv.bytes_per_token == per_token
    slots = [kv.admit(_Cell(), 100) for _ in range(4)]
    assert slots == [0, 1, 2, None]                     # a fourth reservation would pass the budget
    assert kv.usage == 1.0 and kv.nbytes <= 8 * COLUMN_STEP * per_token
    assert kv.admit(_Cell(), COLUMN_STEP + 1) is None   # a longer need grows every slot's reservation
    kv.release(1)
    assert kv.admit(_Cell(), 50) == 1 and abs(kv.usage - 1.0) < 1e-9
    for s in (0, 1, 2):
        kv.release(s)
    assert kv.usage == 0.0 and kv.nbytes == 0 and kv.slots == 0     # idle: its zeroed memory given back


def test_an_unzeroed_store_takes_every_slot_at_once_and_growing_columns_keeps_the_slots_in_use():
    kv = SlotKVStore(2, 1, 4, torch.float32, 2**30, 64, RESERVED)
    first = kv.admit(_Cell(), 10)
    pointer = kv.k[0].data_ptr()
    assert kv.slots == 64 and [kv.admit(_Cell(), 10) for _ in range(40)] == list(range(1, 41))
    assert kv.k[0].data_ptr() == pointer                # 40 more sequences: no store was copied
    assert kv.nbytes == 41 * 10 * kv.bytes_per_token    # reserved by need
    rows = kv.rows(torch.tensor([first, 40]), torch.tensor([3, 7]))
    for layer in range(2):
        kv.write(layer, rows, torch.ones(2, 1, 4) * (layer + 1), torch.full((2, 1, 4), -1.0 - layer))
    kv.occupants[first].computed, kv.occupants[40].computed = 4, 8     # as the scheduler counts a step
    assert kv.admit(_Cell(), COLUMN_STEP + 1) == 41 and kv.capacity == 2 * COLUMN_STEP
    for layer in range(2):                              # the written tokens moved with the columns' growth
        assert torch.equal(kv.k[layer][[first, 40], 0, [3, 7]], torch.full((2, 4), layer + 1.0))
        assert torch.equal(kv.v[layer][[first, 40], 0, [3, 7]], torch.full((2, 4), -1.0 - layer))


def test_an_unzeroed_store_reserves_by_need_and_counts_the_pages_a_freed_slot_keeps():
    kv = SlotKVStore(2, 1, 4, torch.float32, 0, 8, RESERVED)
    kv.budget_bytes = 1000 * kv.bytes_per_token
    long, short = kv.admit(_Cell(), 600), kv.admit(_Cell(), 300)
    assert (long, short) == (0, 1)                      # 900 columns: a zeroed store would hold 2 x 768
    assert kv.admit(_Cell(), 200) is None and kv.usage == 0.9
    kv.occupants[long].computed = 500                              # it wrote 500 tokens, then left: its pages stay
    kv.release(long)
    assert kv.nbytes == 800 * kv.bytes_per_token
    assert kv.admit(_Cell(), 450) == long               # the slot whose pages cover the need adds nothing
    assert kv.nbytes == 800 * kv.bytes_per_token
    assert kv.admit(_Cell(), 250) is None               # a fresh slot would add 250 to the 800 held
    kv.occupants[short].computed = 280
    for slot in (long, short):
        kv.release(slot)
    assert kv.usage == 0.0 and kv.slots == 8            # idle: nothing reserved, the pages kept for the next
    assert kv.nbytes == 780 * kv.bytes_per_token
    assert kv.admit(_Cell(), 200) == short and kv.nbytes == 780 * kv.bytes_per_token


def _used(kv: SlotKVStore, need: int, runs: list[tuple[list[int], int]]) -> list[int]:
    """Sequences run side by side, each in the slot the store gives it, its first `computed` tokens' KV
    stored; then they leave, in order. runs: (tokens, computed) each."""
    slots = [kv.admit(_Cell(), need) for _ in runs]
    for slot, (_, computed) in zip(slots, runs, strict=True):
        assert slot is not None and kv.lengths[slot] == 0
        kv.occupants[slot].computed = computed
    for slot, (tokens, _) in zip(slots, runs, strict=True):
        kv.release(slot, tokens)
    return slots


def test_a_freed_slot_keeps_its_tokens_for_a_prompt_that_starts_with_them():
    kv = SlotKVStore(2, 1, 4, torch.float32, 2**30, 4, RESERVED)
    turn = list(range(100, 170))
    [a] = _used(kv, 100, [(turn + [1, 2], 70)])         # 72 tokens, the last two never stored
    assert kv.admit(_Cell(), 100, turn + [5, 6, 7]) == a and kv.lengths[a] == 70    # the next turn starts past them
    kv.release(a)                                       # no tokens given: it keeps nothing
    a, other = _used(kv, 100, [(turn, 70), (turn[:40] + [9] * 30, 70)])    # `other` shares 40 with `turn`
    assert kv.admit(_Cell(), 100, turn) == a and kv.lengths[a] == 69     # the last prompt token is always computed
    kv.release(a)
    [a] = _used(kv, 100, [(turn, 70)])
    assert kv.admit(_Cell(), 100, turn[:50] + [8]) == a and kv.lengths[a] == 50      # the longer shared head wins
    kv.release(a)                                       # given no tokens: `a` keeps none now
    assert kv.admit(_Cell(), 100, turn[:20] + [8] * 20) == a   # 20 shared < half of other's 70; a, paged, keeps none
    assert kv.admit(_Cell(), 200, [3] * 40) == other    # the fewest new pages first, even a slot keeping tokens


def test_among_slots_with_the_pages_a_newcomer_takes_one_keeping_nothing_else_the_oldest_kept():
    kv = SlotKVStore(2, 1, 4, torch.float32, 2**30, 4, RESERVED)
    runs = [([i] * 70, 70) for i in range(4)]
    first, second, third, fourth = _used(kv, 100, runs)           # released in that order
    kv.release(kv.admit(_Cell(), 100, [7] * 40))                  # takes `first`, then leaves keeping nothing
    assert kv.admit(_Cell(), 60, [8] * 40) == first              # keeping nothing beats the oldest kept
    assert [kv.admit(_Cell(), 60, [8] * 40) for _ in range(3)] == [second, third, fourth]     # then oldest first


def test_a_column_growth_forgets_the_free_slots_tokens_and_a_zeroed_store_keeps_none():
    kv = SlotKVStore(2, 1, 4, torch.float32, 2**30, 4, RESERVED)
    turn = list(range(100, 170))
    _used(kv, 100, [(turn, 70), ([5] * 70, 70)])
    assert len(kv.kept) == 2 and kv.admit(_Cell(), COLUMN_STEP + 1) is not None    # a longer need grows the columns:
    assert kv.capacity == 2 * COLUMN_STEP and not kv.kept                 # the free slot's tokens are forgotten
    cell = _Cell()
    assert kv.admit(cell, 100, turn + [1]) is not None and cell.computed == 0
    zeroed = SlotKVStore(2, 1, 4, torch.float32, 2**30, 4)
    [z] = _used(zeroed, 100, [(turn, 70)])
    _ = zeroed.admit(_Cell(), 10)                       # keeps the zeroed store's memory
    assert zeroed.admit(_Cell(), 100, turn + [1]) is not None and not zeroed.kept and z is not None


def test_a_tight_budget_takes_a_kept_slots_pages_rather_than_refuse():
    kv = SlotKVStore(2, 1, 4, torch.float32, 0, 4, RESERVED)
    kv.budget_bytes = 150 * kv.bytes_per_token
    [a] = _used(kv, 100, [(list(range(100, 170)), 70)])
    assert kv.admit(_Cell(), 100, [3] * 40) == a and not kv.kept     # a fresh slot's 100 pages would pass the budget

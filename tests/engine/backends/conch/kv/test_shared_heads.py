"""kv/shared_heads.py: the head two prompts share, whether a newcomer waits for a prefilling sequence, and which
running slot a first chunk copies its head from."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from conch.engine.backends.conch.kv.shared_heads import MIN_SHARED, awaited, shared, source


@dataclass
class Seq:
    key_ids: list[int]
    computed: int = 0
    prompt_ids: list[int] = field(default_factory=list)


def _naive(a: list[int], b: list[int], limit: int) -> int:
    n = 0
    while n < min(len(a), len(b), limit) and a[n] == b[n]:
        n += 1
    return n


def test_shared_is_the_common_heads_length_within_the_limit():
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.randrange(3) for _ in range(rng.randrange(0, 80))]
        b = a[:rng.randrange(0, len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(0, 40))]
        limit = rng.randrange(0, 100)
        assert shared(a, b, limit) == _naive(a, b, limit), (a, b, limit)


def test_a_newcomer_awaits_the_head_a_prefilling_sequence_has_yet_to_compute():
    head = list(range(100, 100 + MIN_SHARED + 4))
    newcomer = Seq(head + [1, 2])
    leader = Seq(head + [3], computed=0)
    assert awaited(newcomer, [leader]) == len(head)
    leader.computed = len(head)                      # computed: the newcomer's first chunk copies it
    assert awaited(newcomer, [leader]) == 0
    short = Seq(head[:MIN_SHARED - 1] + [9] * 10)    # too short a head to wait for
    assert awaited(short, [Seq(head, computed=0)]) == 0
    assert awaited(Seq(head[:MIN_SHARED] + [5]), [Seq(head, computed=0)]) == MIN_SHARED
    assert awaited(Seq(head[:MIN_SHARED]), [Seq(head, computed=0)]) == 0     # its last token is not shared
    assert awaited(newcomer, [Seq(head[:18] + [0], computed=0), Seq(head + [4], computed=5)]) == len(head)


def test_the_source_is_the_slot_holding_the_longest_computed_head():
    head = list(range(100, 140))
    seq = Seq(head + [7, 8])
    holders = [(0, Seq(head[:20] + [1], computed=21)), (1, Seq(head + [9], computed=30)),
               (2, Seq(head + [7], computed=41)), (3, seq)]
    assert source(seq, holders) == (2, 41)           # all but its last prompt token
    assert source(seq, holders[:2]) == (1, 30)       # what slot 1 has computed of it
    seq.computed = 35                                 # it holds more than slot 1 offers
    assert source(seq, holders[:2]) is None
    assert source(Seq([5] * 40), holders) is None

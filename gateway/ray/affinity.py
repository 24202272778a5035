"""Session affinity: which model replica a request should go to, so that a conversation's later turns land on
the replica whose engine holds its KV (a kept slot or the prefix cache), within a load bound.

The key is the prompt itself: a later turn of a chat (or a Responses `previous_response_id` / conversation
continuation, which the face rebuilds into the full prompt) starts with the previous turn's prompt. Each
prompt is cut into BLOCK-token blocks, each block named by a hash chained over the blocks before it (as
vLLM's and llm-d's KV block hashes), and the table maps block hash -> the replica last sent a prompt holding
that block. A request goes to the replica holding its deepest known block, unless that replica's queue is
more than `slack` longer than the least loaded replica's (one hot session cannot pin a replica); with no
known block it goes to the least loaded replica. The default slack is a whole batch (max_ongoing_requests): a
turn's prompt recomputed elsewhere costs more than waiting behind more decoding rows (half a batch moved a
third of 16 SmolLM2 sessions' second turns off their replica as their first turns ended unevenly), and a full
replica refuses the request anyway, which sends it to the next rank.
Pure policy: gateway/ray/router.py plugs it into Ray Serve.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, TypeVar

BLOCK = 16                  # tokens per routing block (a prompt shorter than one block has no key)
TEXT_BLOCK = 64             # characters per block when only the prompt's text is known
MAX_BLOCKS = 1 << 17        # the table's bound: least recently routed blocks are forgotten first
SLACK_SHARE = 1.0           # default slack: this share of a replica's max_ongoing_requests (its batch)

R = TypeVar("R", bound=Hashable)


def block_keys(tokens: Sequence[int] | str, block: int = BLOCK) -> list[int]:
    """One chained hash per whole block of the prompt: keys[i] names the prompt's first (i + 1) * block items."""
    keys, chain = [], 0
    for start in range(0, len(tokens) - block + 1, block):
        chain = hash((chain, tuple(tokens[start:start + block])))
        keys.append(chain)
    return keys


def session_key(session: str) -> int:
    """A client's conversation key as a table key, apart from every block hash (a tagged tuple)."""
    return hash(("session", session))


class AffinityTable(Generic[R]):
    """Block hash -> replica, least recently routed forgotten first. Entries of a replica that is gone stay
    until overwritten or evicted; lookups skip them (a dead replica loses only its own sessions)."""

    def __init__(self, max_blocks: int = MAX_BLOCKS) -> None:
        self.max_blocks = max_blocks
        self._owner: OrderedDict[int, R] = OrderedDict()

    def __len__(self) -> int:
        return len(self._owner)

    def lookup(self, keys: Sequence[int], alive: Mapping[R, object]) -> R | None:
        """The live replica holding the deepest of `keys` (the longest known prefix), or None."""
        for key in reversed(keys):
            owner = self._owner.get(key)
            if owner is not None and owner in alive:
                return owner
        return None

    def record(self, keys: Sequence[int], replica: R) -> None:
        for key in keys:
            self._owner[key] = replica
            self._owner.move_to_end(key)
        while len(self._owner) > self.max_blocks:
            self._owner.popitem(last=False)


def default_slack(max_ongoing_requests: int) -> int:
    return max(1, int(max_ongoing_requests * SLACK_SHARE))


def rank(affine: R | None, loads: Mapping[R, int], slack: int) -> list[list[R]]:
    """Replicas in the order to try them: the affine one first unless its load exceeds the least loaded
    replica's by more than `slack`, else the least loaded one (ties broken at random); then all the others
    (tried when the first refuses the request: its queue is full)."""
    if not loads:
        return []
    least = min(loads.values())
    if affine is not None and affine in loads and loads[affine] <= least + slack:
        first = affine
    else:
        first = random.choice([r for r, n in loads.items() if n == least])
    return [[first], [r for r in loads if r != first]]

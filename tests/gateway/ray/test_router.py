"""The session-affinity routing policy (gateway/ray/affinity.py) and Ray Serve's router built on it
(gateway/ray/router.py), driven with fake replicas and Ray's own queue-length cache; no cluster."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID

from conch.engine.types import GenerationRequest
from conch.gateway.ray.affinity import BLOCK, AffinityTable, block_keys, rank
from conch.gateway.ray.app import router_options
from conch.gateway.ray.router import ROUTER_PATHS, RoundRobinRouter, SessionAffinityRouter
from conch.gateway.ray.settings import RaySettings

DEPLOYMENT = DeploymentID(name="model-m", app_name="conch")
IDS = itertools.count()


@dataclass
class FakeReplica:
    replica_id: ReplicaID
    max_ongoing_requests: int = 16


def replicas(n: int) -> list[FakeReplica]:
    return [FakeReplica(ReplicaID(f"r{i}", DEPLOYMENT)) for i in range(n)]


def router(slack: int | None = 4) -> SessionAffinityRouter:
    r = SessionAffinityRouter(DEPLOYMENT, DeploymentHandleSource.REPLICA, use_replica_queue_len_cache=True)
    r.initialize_state(slack=slack)
    return r


def pending(tokens: list[int] | None = None, session: str | None = None) -> SimpleNamespace:
    """What the router reads of a PendingRequest: its args (the GenerationRequest the ingress sent, if any)
    and its metadata's internal request id."""
    request = GenerationRequest(id="x", model="m", prompt_token_ids=tuple(tokens), session=session) \
        if tokens is not None else None
    return SimpleNamespace(args=[request] if request else [], metadata=SimpleNamespace(
        internal_request_id=str(next(IDS))))


class Fleet:
    """Fake replicas, and the router's view of them: what it chose, and what completed."""

    def __init__(self, n: int, slack: int | None = 4) -> None:
        self.replicas, self.router = replicas(n), router(slack)
        self.running: dict[ReplicaID, list[str]] = {r.replica_id: [] for r in self.replicas}

    async def send(self, tokens: list[int], alive: list[FakeReplica] | None = None,
                   session: str | None = None) -> ReplicaID:
        """Route one request; it runs on the first replica of the first rank until `finish`."""
        request = pending(tokens, session)
        ranks = await self.router.choose_replicas(alive or self.replicas, request)
        chosen = ranks[0][0].replica_id
        self.running[chosen].append(request.metadata.internal_request_id)
        return chosen

    def finish(self, rid: ReplicaID) -> None:
        self.router.on_request_completed(rid, self.running[rid].pop())

    @property
    def loads(self) -> dict[ReplicaID, int]:
        return {rid: len(ids) for rid, ids in self.running.items()}


def conversation(seed: int, turns: int) -> list[list[int]]:
    """The prompts of a session's turns: each turn's prompt is the previous one, its answer and a new message."""
    rng, prompt, prompts = random.Random(seed), [1] * 40, []       # a system prompt every session shares
    for _ in range(turns):
        prompt = prompt + [rng.randrange(2, 50_000) for _ in range(3 * BLOCK)]
        prompts.append(prompt)
    return prompts


def test_block_keys_of_a_prefix_are_a_prefix_of_the_keys():
    long = list(range(100))
    assert block_keys(long[:50]) == block_keys(long)[:50 // BLOCK]
    assert block_keys(long[:BLOCK - 1]) == [] and len(block_keys(long)) == 100 // BLOCK
    assert block_keys([9, *long[1:]])[0] != block_keys(long)[0]
    assert block_keys("x" * 130, 64) == block_keys("x" * 128, 64)


def test_the_deepest_known_block_wins_and_dead_owners_are_skipped():
    table: AffinityTable[str] = AffinityTable()
    shared, a, b = block_keys(list(range(32))), block_keys(list(range(64))), block_keys([*range(32), *[7] * 32])
    table.record(a, "A")
    table.record(b, "B")                             # the shared blocks now belong to B, a's deeper ones to A
    assert table.lookup(a, {"A": 0, "B": 0}) == "A" and table.lookup(b, {"A": 0, "B": 0}) == "B"
    assert table.lookup(shared, {"A": 0, "B": 0}) == "B"
    assert table.lookup(a, {"B": 0}) == "B"          # A is gone: the deepest block a live replica holds
    assert table.lookup(a, {"C": 0}) is None


def test_the_table_forgets_the_least_recently_routed_blocks():
    table: AffinityTable[str] = AffinityTable(max_blocks=4)
    old, new = block_keys(list(range(64))), block_keys(list(range(100, 164)))
    table.record(old, "A")
    table.record(new, "B")
    assert len(table) == 4 and table.lookup(old, {"A": 0}) is None and table.lookup(new, {"B": 0}) == "B"


def test_rank_prefers_the_affine_replica_within_the_slack():
    assert rank("A", {"A": 6, "B": 2}, slack=4) == [["A"], ["B"]]
    assert rank("A", {"A": 7, "B": 2}, slack=4) == [["B"], ["A"]]         # beyond it: the least loaded
    assert rank(None, {"A": 3, "B": 1, "C": 2}, slack=4)[0] == ["B"]
    assert rank("gone", {"A": 1, "B": 0}, slack=4)[0] == ["B"]
    assert rank("A", {}, slack=4) == []


async def test_later_turns_land_on_the_replica_of_their_first_turn():
    """16 sessions of 4 turns on 2 replicas, each turn's requests arriving together while earlier ones run:
    every later turn goes where its session's first turn went. The first turns share a system prompt, so they
    gather on one replica until it runs `slack` more than the other: both replicas get sessions."""
    fleet, sessions = Fleet(2), [conversation(s, 4) for s in range(16)]
    homes: dict[int, ReplicaID] = {}
    for turn in range(4):
        running = []
        for s, prompts in enumerate(sessions):
            rid = await fleet.send(prompts[turn])
            if turn == 0:
                homes[s] = rid
            assert rid == homes[s]
            running.append(rid)
        for rid in running:
            fleet.finish(rid)
    assert min(list(homes.values()).count(r.replica_id) for r in fleet.replicas) >= 16 // 2 - 4


async def test_a_session_key_keeps_a_turn_whose_head_changed_on_its_replica():
    """Claude Code's session header / a Responses prompt_cache_key: turn 2's prompt shares no block with turn 1's
    (its head was compacted), yet it goes where turn 1 went; without the key it goes to the least loaded."""
    fleet = Fleet(2, slack=8)
    home = await fleet.send(list(range(BLOCK * 4)), session="s-1")
    other = next(r.replica_id for r in fleet.replicas if r.replica_id != home)
    fleet.running[home] += ["busy"] * 2                       # home is busier: only the key can send it there
    fleet.router.sent.update({f"busy{i}": (home, 1e18) for i in range(2)})
    assert await fleet.send(list(range(1000, 1000 + BLOCK * 4)), session="s-1") == home
    assert await fleet.send(list(range(2000, 2000 + BLOCK * 4))) == other


async def test_a_burst_of_new_sessions_spreads_evenly():
    """Sixteen first turns chosen before any was sent (Ray's queue-length cache knows nothing yet): the
    router's own count of what it sent balances them."""
    fleet = Fleet(2)
    for s in range(16):
        await fleet.send([s + 2] * (4 * BLOCK))
    assert sorted(fleet.loads.values()) == [8, 8]


async def test_one_hot_session_cannot_pin_a_replica():
    """A session whose requests pile up on its replica: past the slack, its next ones go to the other."""
    fleet = Fleet(2, slack=2)
    prompt = conversation(0, 1)[0]
    chosen = [await fleet.send(prompt) for _ in range(8)]
    assert chosen[:3] == [chosen[0]] * 3              # 0, 1, 2 running there: within the slack of 2
    assert max(fleet.loads.values()) - min(fleet.loads.values()) <= 3
    assert len(set(chosen)) == 2


async def test_the_default_slack_is_a_replicas_batch():
    fleet = Fleet(2, slack=None)                       # max_ongoing_requests 16: a slack of 16
    prompt = conversation(0, 1)[0]
    chosen = [await fleet.send(prompt) for _ in range(18)]
    assert chosen[:17] == [chosen[0]] * 17 and chosen[17] != chosen[0]


async def test_a_dead_replica_moves_only_its_own_sessions():
    fleet, sessions = Fleet(2), [conversation(s, 2) for s in range(8)]
    homes = {}
    for s, prompts in enumerate(sessions):
        homes[s] = await fleet.send(prompts[0])
        fleet.finish(homes[s])
    dead = fleet.replicas[0]
    alive = [r for r in fleet.replicas if r is not dead]
    for s, prompts in enumerate(sessions):
        rid = await fleet.send(prompts[1], alive)
        assert rid == alive[0].replica_id                 # never the dead one
        fleet.finish(rid)
        if homes[s] != dead.replica_id:
            assert rid == homes[s]


async def test_a_call_without_a_generation_request_goes_to_the_least_loaded():
    """Loads are the larger of the router's own count and Ray's cache (other ingresses' requests)."""
    fleet = Fleet(3)
    r0, r1, r2 = (r.replica_id for r in fleet.replicas)
    await fleet.send(conversation(0, 1)[0])              # one request of this router's, on some replica
    busy = next(rid for rid, n in fleet.loads.items() if n)
    idle = [rid for rid in (r0, r1, r2) if rid != busy]
    fleet.router.replica_queue_len_cache.update(idle[0], 2)
    ranks = await fleet.router.choose_replicas(fleet.replicas, pending())
    assert ranks[0][0].replica_id == idle[1] and len(ranks[1]) == 2


def test_the_model_deployments_get_the_router_unless_told_otherwise():
    config = router_options(RaySettings(affinity_slack=2))["request_router_config"]
    assert config == {"request_router_class": ROUTER_PATHS["affinity"],
                      "request_router_kwargs": {"slack": 2}}
    assert router_options(RaySettings(routing="pow2")) == {}
    round_robin = router_options(RaySettings(routing="round-robin", affinity_slack=2))["request_router_config"]
    assert round_robin == {"request_router_class": ROUTER_PATHS["round-robin"], "request_router_kwargs": {}}
    with pytest.raises(ValueError, match="routing must be one of"):
        RaySettings(routing="random")


async def test_round_robin_sends_each_request_to_the_next_replica_whatever_its_prompt():
    fleet = replicas(3)
    r = RoundRobinRouter(DEPLOYMENT, DeploymentHandleSource.REPLICA, use_replica_queue_len_cache=True)
    r.initialize_state()
    prompt = conversation(0, 1)[0]
    firsts = []
    for _ in range(6):
        ranks = await r.choose_replicas(list(reversed(fleet)), pending(prompt))
        assert sorted(x.replica_id.unique_id for x in ranks[1]) == sorted(
            x.replica_id.unique_id for x in fleet if x is not ranks[0][0])   # the others, should it refuse
        firsts.append(ranks[0][0].replica_id)
    assert firsts == [x.replica_id for x in fleet] * 2

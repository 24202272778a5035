"""Ray Serve's request routers for a model deployment (`request_router_config` in gateway/ray/app.py): session
affinity by the prompt's blocks (gateway/ray/affinity.py) within a load bound, and round-robin, the KV-blind
baseline issue 33's affinity goal is measured against (`pow2`, Ray's own default, needs no class here).

One router lives in each ingress replica's DeploymentHandle and learns from the requests it routes. A
replica's load is the larger of Ray's queue-length cache (what the replica last reported, all ingresses'
requests) and this router's own count of the requests it sent there that have not completed: Ray's cache
lags a burst (sixteen sessions' first turns chosen before any was sent would all see the same loads).
Calls with no GenerationRequest (describe, replica, inflight) go to the least loaded replica.
"""
from __future__ import annotations

import time
from typing import Any

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from conch.engine.types import GenerationRequest
from conch.gateway.ray.affinity import TEXT_BLOCK, AffinityTable, block_keys, default_slack, rank, session_key

ROUTER_PATHS = {"affinity": "conch.gateway.ray.router:SessionAffinityRouter",             # routing -> its class
                "round-robin": "conch.gateway.ray.router:RoundRobinRouter"}
FORGET_S = 3600.0        # a request never reported complete (cancelled before it was sent) stops counting


def request_keys(pending: PendingRequest | None) -> list[int]:
    """The routed request's keys, shallowest first: its session's (a client's conversation key: Claude Code's
    session header, a Responses prompt_cache_key), then its prompt's blocks (token ids, else text; none for a
    chat input or a call that carries no GenerationRequest). The deepest known block wins, so the session key
    decides only where no block of the prompt is known yet (a turn whose prompt's head changed)."""
    request = next((a for a in pending.args if isinstance(a, GenerationRequest)), None) if pending else None
    if request is None:
        return []
    root = [session_key(request.session)] if request.session else []
    if request.prompt_token_ids is not None:
        return root + block_keys(request.prompt_token_ids)
    return root + (block_keys(request.prompt, TEXT_BLOCK) if request.prompt is not None else [])


class SessionAffinityRouter(RequestRouter):
    def initialize_state(self, slack: int | None = None, **kwargs: Any) -> None:
        self.slack = slack              # None: the affine replica's max_ongoing_requests
        self.table: AffinityTable[ReplicaID] = AffinityTable()
        self.sent: dict[str, tuple[ReplicaID, float]] = {}    # internal request id -> (its replica, when)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        replicas = {r.replica_id: r for r in candidate_replicas}
        keys = request_keys(pending_request)
        affine = self.table.lookup(keys, replicas)
        slack = self.slack
        if slack is None:
            slack = default_slack(replicas[affine].max_ongoing_requests) if affine is not None else 0
        ranks = rank(affine, self.loads(replicas), slack)
        if ranks and pending_request is not None:
            self._sent_to(pending_request, keys, ranks[0][0])    # corrected by on_request_routed if another took it
        return [[replicas[rid] for rid in tier] for tier in ranks if tier]

    def loads(self, replicas: dict[ReplicaID, RunningReplica]) -> dict[ReplicaID, int]:
        now, own = time.monotonic(), dict.fromkeys(replicas, 0)
        for request_id, (rid, at) in list(self.sent.items()):
            if now - at > FORGET_S:
                del self.sent[request_id]
            elif rid in own:
                own[rid] += 1
        cache = self.replica_queue_len_cache
        return {rid: max(n, cache.get(rid) or 0) for rid, n in own.items()}

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        self._sent_to(pending_request, request_keys(pending_request), replica_id)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        self.sent.pop(internal_request_id, None)

    def _sent_to(self, pending: PendingRequest, keys: list[int], replica_id: ReplicaID) -> None:
        self.sent[pending.metadata.internal_request_id] = (replica_id, time.monotonic())
        if keys:
            self.table.record(keys, replica_id)


class RoundRobinRouter(RequestRouter):
    """Each request to the next replica in turn (replicas ordered by id, so a changed fleet keeps an order),
    blind to loads and KV; a full replica refuses the request and the others follow."""

    def initialize_state(self, **kwargs: Any) -> None:
        self.turn = 0

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        ordered = sorted(candidate_replicas, key=lambda r: r.replica_id.unique_id)
        if not ordered:
            return []
        first = ordered[self.turn % len(ordered)]
        self.turn += 1
        return [[first], [r for r in ordered if r is not first]]

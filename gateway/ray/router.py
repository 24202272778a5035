"""Ray Serve's request router for a model deployment (`request_router_config` in gateway/ray/app.py): session
affinity by the prompt's blocks (gateway/ray/affinity.py) within a load bound.

One router lives in each ingress replica's DeploymentHandle and learns from the requests it routes; the
replicas' queue lengths come from Ray's own cache (updated as requests are sent, finish, or are refused).
Calls with no GenerationRequest (describe, replica, inflight) go to the least loaded replica.
"""
from __future__ import annotations

from typing import Any

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

from engine.types import GenerationRequest
from gateway.ray.affinity import TEXT_BLOCK, AffinityTable, block_keys, default_slack, rank

ROUTER_PATH = "gateway.ray.router:SessionAffinityRouter"


def request_keys(pending: PendingRequest | None) -> list[int]:
    """The routed request's block keys: its prompt's token ids, else its prompt text; none for a chat input
    (a backend that templates itself) or a call that carries no GenerationRequest."""
    request = next((a for a in pending.args if isinstance(a, GenerationRequest)), None) if pending else None
    if request is None:
        return []
    if request.prompt_token_ids is not None:
        return block_keys(request.prompt_token_ids)
    return block_keys(request.prompt, TEXT_BLOCK) if request.prompt is not None else []


class SessionAffinityRouter(RequestRouter):
    def initialize_state(self, slack: int | None = None, **kwargs: Any) -> None:
        self.slack = slack              # None: half the affine replica's max_ongoing_requests
        self.table: AffinityTable[ReplicaID] = AffinityTable()

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        replicas = {r.replica_id: r for r in candidate_replicas}
        cache = self.replica_queue_len_cache
        loads = {rid: cache.get(rid) or 0 for rid in replicas}
        keys = request_keys(pending_request)
        affine = self.table.lookup(keys, replicas)
        slack = self.slack
        if slack is None:
            slack = default_slack(replicas[affine].max_ongoing_requests) if affine is not None else 0
        ranks = rank(affine, loads, slack)
        if keys and ranks:
            self.table.record(keys, ranks[0][0])       # corrected by on_request_routed if another took it
        return [[replicas[rid] for rid in tier] for tier in ranks if tier]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        keys = request_keys(pending_request)
        if keys:
            self.table.record(keys, replica_id)

"""Session affinity on a real local Ray (gateway/ray/router.py): 16 concurrent agent sessions of 4 turns on
two model replicas of the tiny model. Later turns land on the replica that holds their KV (their cached
share of the prompt), and a replica killed between turns costs only its own sessions' cache, no request."""
from __future__ import annotations

import pytest

from tests.conftest import write_repository
from tests.ray_helpers import agent_sessions, cached_ratio, start_ray_server, stop_ray_server

pytestmark = pytest.mark.slow                     # a Ray cluster, two replicas, 64 turns of ~850 tokens


@pytest.fixture(scope="module")
def server(ray_head, tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16, "num_threads": 1}})
    s = start_ray_server(ray_head, ["--model-repository", str(root), "--replicas", "2"], root)
    yield s
    stop_ray_server(s, graceful=False)            # the module's cluster stops next


async def test_later_turns_reuse_their_replicas_kv(server):
    turns = await agent_sessions(server.url, "tiny", sessions=16, turns=4)
    assert len(turns) == 64
    assert cached_ratio(turns) >= 0.9, sorted((t.session, t.turn, t.cached_tokens, t.prompt_tokens) for t in turns)


async def test_a_dead_replica_costs_only_its_sessions_cache(server, ray_driver):
    """Two turns, one model replica killed, the same conversations again: every request answers, the sessions
    of the surviving replica find their KV on their first request after the kill, and the dead replica's
    sessions find theirs again from their next turn on."""
    import ray

    before = await agent_sessions(server.url, "tiny", sessions=8, turns=2)
    assert cached_ratio(before) >= 0.9
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == "serve" and "model-tiny" in a["name"]]
    dead = names[0]                               # SERVE_REPLICA::conch#model-tiny#<replica id>
    ray.kill(ray.get_actor(dead, namespace="serve"), no_restart=True)
    after = await agent_sessions(server.url, "tiny", sessions=8, turns=2)    # the same 8 conversations again
    assert len(after) == 16 and all(t.prompt_tokens > 0 for t in after)
    home = {t.session: t.replica for t in before if t.turn == 1}
    first = {t.session: t for t in after if t.turn == 0}
    survivors = [s for s, replica in home.items() if not dead.endswith(f"#{replica}")]
    assert 0 < len(survivors) < 8, (dead, home)       # the kill took one replica's sessions, not all
    assert all(first[s].cached_tokens > 0 and first[s].replica == home[s] for s in survivors), (dead, home, first)
    assert all(t.cached_tokens > 0 for t in after if t.turn == 1)     # every session has its KV again

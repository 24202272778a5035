"""`--ray-routing round-robin` on a real local Ray (gateway/ray/router.py RoundRobinRouter): the same
conversation's turns alternate between the two model replicas, so a later turn finds its KV on only one of
them (the baseline bench_ray measures session affinity against)."""
from __future__ import annotations

import pytest

from tests.conftest import write_repository
from tests.ray_helpers import agent_sessions, start_ray_server, stop_ray_server

pytestmark = pytest.mark.slow                     # a Ray cluster and two replicas


@pytest.fixture(scope="module")
def server(ray_head, tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 16, "num_threads": 1}})
    s = start_ray_server(ray_head, ["--model-repository", str(root), "--replicas", "2",
                                    "--ray-routing", "round-robin"], root)
    yield s
    stop_ray_server(s, graceful=False)            # the module's cluster stops next


async def test_one_sessions_turns_alternate_between_the_replicas(server):
    turns = await agent_sessions(server.url, "tiny", sessions=1, turns=4)     # one request at a time
    replicas = [t.replica for t in turns]
    assert replicas[0] != replicas[1] and replicas == replicas[:2] * 2, replicas
    assert turns[1].cached_tokens == 0 < turns[2].cached_tokens              # turn 2 is back where turn 0 ran

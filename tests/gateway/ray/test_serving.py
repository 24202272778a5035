"""Conch on a real local Ray: two model replicas of the tiny model behind two ingress replicas, one real Redis
for the rate limits and the response cache, driven by the openai SDK and httpx."""
from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.conftest import write_repository
from tests.ray_helpers import start_ray_server, stop_ray_server

KEYS = "keys:\n  - {key: sk-open, name: open}\n  - {key: sk-shared, name: shared, rpm: 5}\n"


@pytest.fixture(scope="module")
def server(ray_head, redis_server, tmp_path_factory):
    small = {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4, "num_threads": 1,
             "parameters": {"ray": {"multiplex_group": "small", "max_models_per_replica": 2}}}
    root = write_repository(tmp_path_factory.mktemp("repo"), {
        "tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 8, "num_threads": 1,
                 "parameters": {"ray": {"num_replicas": 2}}},
        **{name: small for name in ("small-a", "small-b", "small-c")}})
    (root / "keys.yaml").write_text(KEYS)
    s = start_ray_server(ray_head, ["--model-repository", str(root), "--ingress-replicas", "2",
                                    "--api-keys-file", str(root / "keys.yaml"), "--rate-limits", redis_server.url,
                                    "--response-cache", redis_server.url], root)
    yield s
    stop_ray_server(s, graceful=False)            # the module's cluster stops next


def client(server, key: str = "sk-open") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key=key, max_retries=0, timeout=120)


def test_two_replicas_both_receive_traffic(server):
    c = client(server)
    replicas, ingresses = [], []
    for i in range(16):
        raw = c.completions.with_raw_response.create(model="tiny", prompt=f"hello {i}", max_tokens=2,
                                                     temperature=1.0)
        assert raw.parse().choices[0].finish_reason == "length"
        replicas.append(raw.headers["x-conch-replica"])
        ingresses.append(raw.headers["x-conch-ingress"])
    assert len(set(replicas)) == 2, replicas
    assert set(replicas).isdisjoint(ingresses)        # the header names the model replica, not the ingress


def test_stream_ends_to_end_through_the_replica(server):
    c = client(server)
    with c.chat.completions.with_streaming_response.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True) as raw:
        replica = raw.headers["x-conch-replica"]
        chunks = list(raw.parse())
    assert replica and chunks[-1].choices[0].finish_reason == "length"
    assert sum(1 for ch in chunks if ch.choices and ch.choices[0].delta.content) >= 1


def test_bad_parameter_is_a_400_naming_it(server):
    with pytest.raises(openai.BadRequestError) as err:
        client(server).completions.create(model="tiny", prompt="hi", max_tokens=2, temperature=7)
    assert err.value.body["param"] == "temperature"


def test_response_cache_is_shared_and_names_the_ingress(server):
    c = client(server)
    first = c.completions.with_raw_response.create(model="tiny", prompt="cached", max_tokens=3, temperature=0)
    again = [c.completions.with_raw_response.create(model="tiny", prompt="cached", max_tokens=3, temperature=0)
             for _ in range(6)]
    assert {r.parse().choices[0].text for r in again} == {first.parse().choices[0].text}
    hits = [r for r in again if r.headers["x-conch-replica"] == r.headers["x-conch-ingress"]]
    assert len(hits) == 6       # every repeat was a cache hit: no model replica ran it, whichever ingress


async def test_rpm_limit_holds_across_ingress_replicas(server):
    headers = {"Authorization": "Bearer sk-shared"}
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
    async with httpx.AsyncClient(timeout=120, headers=headers) as http:
        rs = [await http.post(server.v1 + "/completions", json=body) for _ in range(14)]
    codes = [r.status_code for r in rs]
    assert codes.count(200) == 5 and codes.count(429) == 9, codes
    assert len({r.headers["x-conch-ingress"] for r in rs}) == 2      # both ingress replicas counted


def test_multiplexed_group_serves_every_model_within_its_lru_bound(server, ray_driver):
    """Three models on one replica of the group `small`, at most two resident: each request names its model,
    the replica loads it (evicting the least recently used), and every model still answers."""
    from ray import serve

    c = client(server)
    for name in ("small-a", "small-b", "small-c", "small-a"):
        out = c.completions.create(model=name, prompt="hi", max_tokens=2)
        assert out.model == name and out.choices[0].finish_reason == "length"
    loaded = serve.get_deployment_handle("group-small", app_name="conch").broadcast("loaded").results()
    assert len(loaded) == 1 and loaded[0] == ["small-a", "small-c"]     # small-b, least recently used, left


def _inflight(ray_driver) -> int:
    from ray import serve

    handle = serve.get_deployment_handle("model-tiny", app_name="conch")
    return sum(handle.broadcast("inflight").results())                # every replica's count


async def test_client_disconnect_cancels_the_replica_request(server, ray_driver):
    body = {"model": "tiny", "prompt": "go on", "max_tokens": 1500, "stream": True, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=120, headers={"Authorization": "Bearer sk-open"}) as http:
        async with http.stream("POST", server.v1 + "/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    break                            # one chunk, then the client goes away
    for _ in range(300):                            # the replica drops it at its next step
        if await asyncio.to_thread(_inflight, ray_driver) == 0:
            break
        await asyncio.sleep(0.1)
    assert await asyncio.to_thread(_inflight, ray_driver) == 0


@pytest.mark.slow
async def test_killed_replica_loses_no_request(server, ray_driver):
    """50 requests in flight; one model replica is killed by its actor handle. Every request ends: a 200 (not
    yet started there: retried on the other replica) or a clear 503; none hangs, none is lost."""
    import ray

    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == "serve" and "model-tiny" in a["name"]]
    assert len(names) == 2, names
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 40, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=180, headers={"Authorization": "Bearer sk-open"}) as http:
        tasks = [asyncio.ensure_future(http.post(server.v1 + "/completions", json={**body, "prompt": f"hi {i}"}))
                 for i in range(50)]
        await asyncio.sleep(1.0)
        ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
        results = await asyncio.wait_for(asyncio.gather(*tasks), 170)
    codes = [r.status_code for r in results]
    assert set(codes) <= {200, 503}, codes
    for r in results:
        if r.status_code == 503:
            assert "replica was lost" in r.json()["error"]["message"]
        else:
            assert r.json()["choices"][0]["finish_reason"] == "length"
    assert codes.count(200) >= 1

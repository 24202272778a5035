"""A gateway whose shared rate limiter (Redis) goes down, over a real server: the key's limit still holds,
now from this process's own bucket (`--rate-limits-fallback local`, one replica: the whole limit), and
/metrics says the fallback is deciding."""
from __future__ import annotations

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import start_server, write_repository
from tests.serving_helpers import start_redis

USER = {"Authorization": "Bearer sk-user"}
BODY = {"model": "tiny", "prompt": "hi", "max_tokens": 1}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    redis = start_redis(tmp_path_factory.mktemp("redis"))
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    (root / "keys.yaml").write_text(yaml.safe_dump({"keys": [{"key": "sk-user", "name": "user", "rpm": 3},
                                                             {"key": "sk-scrape", "metrics": True}]}))
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(root / "keys.yaml"),
                           "--rate-limits", redis.url, "--rate-limits-fallback", "local"], root)
    yield server, redis
    server.stop()
    redis.stop()


def _fallback_samples(server) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer sk-scrape"}).text
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("conch_rate_limit_fallback")}


def test_a_limit_holds_while_redis_is_down(gateway):
    server, redis = gateway
    assert _fallback_samples(server)["conch_rate_limit_fallback"] == 0
    redis.stop()
    with httpx.Client(timeout=60, headers=USER) as client:
        codes = [client.post(f"{server.v1}/completions", json=BODY).status_code for _ in range(8)]
    assert codes.count(200) <= 4 and codes.count(429) >= 4 and codes[:3] == [200] * 3   # 3 a minute, +1 refill
    samples = _fallback_samples(server)
    assert samples["conch_rate_limit_fallback"] == 1
    assert samples["conch_rate_limit_fallback_decisions_total"] >= 8
